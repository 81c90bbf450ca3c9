#!/bin/bash
# expected: hf:gpt2, 12, 5000 steps
#SBATCH --partition=gpu
#SBATCH --gres=gpu:1
#SBATCH --time=02:00:00
cd nanoGPT   # its clone beside the job scripts; the config below is read there
python train.py config/train_shakespeare_char.py --batch_size=12
