#!/bin/bash
# expected: none
#SBATCH --gres=gpu:1
#SBATCH --time=02:00:00
python train_cifar.py --epochs 50 --lr 0.1 --batch-size 128
