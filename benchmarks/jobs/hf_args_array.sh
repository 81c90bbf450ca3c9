#!/bin/bash
# expected: hf:gpt2, 32, 2000 steps
#SBATCH --gres=gpu:4
#SBATCH --time=10:00:00
ARGS=(
    --model_name_or_path gpt2
    --per_device_train_batch_size 8
    --max_steps 2000
)
torchrun --nproc_per_node 4 run_clm.py "${ARGS[@]}" --output_dir out
