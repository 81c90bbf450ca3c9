#!/bin/bash
# expected: none
#SBATCH --time=04:00:00
python train.py --model resnet50 --epochs 10 --data-path /data/mystery --batch-size 64
