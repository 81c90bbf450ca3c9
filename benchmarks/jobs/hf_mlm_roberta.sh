#!/bin/bash
# expected: hf:FacebookAI/roberta-base, 32, 3 epochs
#SBATCH --partition=gpu
#SBATCH --gres=gpu:4
#SBATCH --time=1-00:00:00
python run_mlm.py --model_name_or_path FacebookAI/roberta-base --dataset_name wikitext --dataset_config_name wikitext-2-raw-v1 --per_device_train_batch_size 8 --per_device_eval_batch_size 8 --do_train --do_eval --output_dir /tmp/test-mlm
