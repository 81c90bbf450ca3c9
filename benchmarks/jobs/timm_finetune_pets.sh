#!/bin/bash
# expected: none
#SBATCH --gres=gpu:2
#SBATCH --time=06:00:00
torchrun --nproc_per_node=2 train.py --dataset torch/oxford_iiit_pet --dataset-download \
  --data-dir /scratch/data --model convnext_tiny.fb_in22k --pretrained --num-classes 37 \
  -b 64 --epochs 30 --lr 5e-4 --amp
