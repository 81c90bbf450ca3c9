#!/bin/bash
# expected: hf:gpt2, 32, 2000 steps
#SBATCH --gres=gpu:4
#SBATCH --time=10:00:00
MODEL_ARGS="--model_name_or_path gpt2 --block_size 512"
TRAIN_ARGS="
    --per_device_train_batch_size 8 \
    --max_steps 2000 \
    --bf16
"
torchrun --nproc_per_node 4 run_clm.py $MODEL_ARGS $TRAIN_ARGS --output_dir out
