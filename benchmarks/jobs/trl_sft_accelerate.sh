#!/bin/bash
# expected: hf:Qwen/Qwen2.5-0.5B, 128, 1 epochs
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH --time=2-00:00:00
accelerate launch --num_processes 8 --mixed_precision bf16 -m trl.scripts.sft --model_name_or_path Qwen/Qwen2.5-0.5B --dataset_name trl-lib/Capybara --learning_rate 2.0e-5 --num_train_epochs 1 --packing --per_device_train_batch_size 2 --gradient_accumulation_steps 8 --gradient_checkpointing --logging_steps 25 --eval_strategy steps --eval_steps 100 --output_dir Qwen2-0.5B-SFT
