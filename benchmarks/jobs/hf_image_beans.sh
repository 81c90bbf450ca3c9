#!/bin/bash
# expected: hf:google/vit-base-patch16-224-in21k, 32, 5 epochs
#SBATCH --partition=gpu
#SBATCH --gres=gpu:4
#SBATCH --time=1-00:00:00
python run_image_classification.py --model_name_or_path google/vit-base-patch16-224-in21k --dataset_name beans --output_dir ./beans_outputs/ --remove_unused_columns False --label_column_name labels --do_train --do_eval --learning_rate 2e-5 --num_train_epochs 5 --per_device_train_batch_size 8 --per_device_eval_batch_size 8 --logging_strategy steps --logging_steps 10 --eval_strategy epoch --save_strategy epoch --load_best_model_at_end True --save_total_limit 3 --seed 1337
