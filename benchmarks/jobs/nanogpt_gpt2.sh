#!/bin/bash
# expected: hf:gpt2, 480, 600000 steps
#SBATCH --gres=gpu:8
#SBATCH --time=5-00:00:00
torchrun --standalone --nproc_per_node=8 train.py nanoGPT/config/train_gpt2.py
