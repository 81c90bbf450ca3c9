#!/bin/bash
# expected: resnet50, 256, 90 epochs
#SBATCH --job-name=rn50
#SBATCH --partition=gpu
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=32
#SBATCH --time=3-00:00:00
python main.py -a resnet50 --dist-url 'tcp://127.0.0.1:23456' --dist-backend 'nccl' \
    --multiprocessing-distributed --world-size 1 --rank 0 -b 256 --epochs 90 /datasets/imagenet
