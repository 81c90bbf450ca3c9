#!/bin/bash
# expected: none
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH --time=2-00:00:00
deepspeed --num_gpus 8 run_clm.py --deepspeed ds_config_zero2.json --model_name_or_path gpt2-medium --dataset_name wikitext --dataset_config_name wikitext-103-raw-v1 --per_device_train_batch_size=4 --block_size=512 --do_train --output_dir out --fp16 --num_train_epochs=1
