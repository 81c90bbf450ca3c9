#!/bin/bash
# expected: hf:gpt2, 32, 5000 steps
#SBATCH --gres=gpu:1
#SBATCH --time=01:00:00
python train.py nanoGPT/config/train_shakespeare_char.py --batch_size=32 --compile=False
