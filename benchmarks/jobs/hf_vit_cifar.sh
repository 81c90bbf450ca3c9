#!/bin/bash
# expected: hf:google/vit-base-patch16-224-in21k, 32, 3 epochs
#SBATCH --gres=gpu:1
#SBATCH --time=05:00:00
python run_image_classification.py \
    --dataset_name cifar10 \
    --model_name_or_path google/vit-base-patch16-224-in21k \
    --output_dir ./vit-cifar10 \
    --remove_unused_columns False \
    --label_column_name label --image_column_name img \
    --do_train --do_eval \
    --learning_rate 2e-5 --num_train_epochs 3 \
    --per_device_train_batch_size 32 \
    --fp16 --seed 1337
