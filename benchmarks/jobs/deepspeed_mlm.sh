#!/bin/bash
# expected: hf:FacebookAI/roberta-large, 256, 20000 steps
#SBATCH --gres=gpu:8
#SBATCH --time=1-00:00:00
deepspeed --num_gpus=8 run_mlm.py \
    --model_name_or_path FacebookAI/roberta-large \
    --dataset_name wikitext --dataset_config_name wikitext-2-raw-v1 \
    --per_device_train_batch_size 16 --gradient_accumulation_steps 2 \
    --max_steps 20000 --bf16 --deepspeed ds_config_zero2.json \
    --do_train --output_dir out/roberta
