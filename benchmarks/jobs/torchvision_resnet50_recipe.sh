#!/bin/bash
# expected: resnet50, 1024, 600 epochs
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH --time=2-00:00:00
torchrun --nproc_per_node=8 train.py --model resnet50 --batch-size 128 --lr 0.5 \
  --lr-scheduler cosineannealinglr --lr-warmup-epochs 5 --lr-warmup-method linear \
  --auto-augment ta_wide --epochs 600 --random-erase 0.1 --weight-decay 0.00002 \
  --norm-weight-decay 0.0 --label-smoothing 0.1 --mixup-alpha 0.2 --cutmix-alpha 1.0 \
  --train-crop-size 176 --model-ema --val-resize-size 232 --ra-sampler --ra-reps 4 --data-path /data/imagenet
