#!/bin/bash
# expected: hf:meta-llama/Llama-3.2-1B, 32, 2 epochs
#SBATCH --partition=gpu
#SBATCH --gres=gpu:4
#SBATCH --time=1-00:00:00
accelerate launch --config_file fsdp.yaml run_clm_no_trainer.py --model_name_or_path meta-llama/Llama-3.2-1B --dataset_name wikitext --dataset_config_name wikitext-2-raw-v1 --per_device_train_batch_size 2 --gradient_accumulation_steps 4 --block_size 2048 --num_train_epochs 2 --with_tracking --output_dir out
