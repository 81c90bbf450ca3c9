#!/bin/bash
# expected: none
#SBATCH --gres=gpu:8
#SBATCH --time=12:00:00
accelerate launch --config_file examples/accelerate_configs/deepspeed_zero3.yaml \
    trl/scripts/dpo.py \
    --dataset_name trl-lib/ultrafeedback_binarized \
    --model_name_or_path Qwen/Qwen2-0.5B-Instruct \
    --learning_rate 5.0e-7 \
    --num_train_epochs 1 \
    --per_device_train_batch_size 2 \
    --gradient_accumulation_steps 8 \
    --gradient_checkpointing \
    --output_dir Qwen2-0.5B-DPO
