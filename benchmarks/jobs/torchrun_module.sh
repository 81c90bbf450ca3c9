#!/bin/bash
# expected: none
#SBATCH --gres=gpu:4
#SBATCH --time=1-00:00:00
torchrun --nproc-per-node=gpu -m training.main --model ViT-B-32 --train-data '/data/laion/{00000..41455}.tar' \
  --train-num-samples 10968539 --dataset-type webdataset --batch-size 320 --precision amp --workers 8 --epochs 32
