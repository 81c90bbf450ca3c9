#!/bin/bash
# expected: none
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --gres=gpu:4
#SBATCH --time=12:00:00
srun python train.py --accelerator gpu --devices 4 --max_epochs 20 --batch_size 64 --model resnet50 --data /data/imagenet
