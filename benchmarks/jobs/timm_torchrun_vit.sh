#!/bin/bash
# expected: timm:vit_base_patch16_224, 1024, 300 epochs
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH --time=2-00:00:00
torchrun --standalone --nnodes=1 --nproc-per-node=8 train.py --data-dir /data/imagenet \
  --model vit_base_patch16_224 --batch-size 128 --opt adamw --lr 1e-3 --weight-decay 0.05 \
  --epochs 300 --sched cosine --warmup-epochs 20 --amp --aa rand-m9-mstd0.5-inc1 --mixup 0.8 --cutmix 1.0 \
  --drop-path 0.1 --model-ema
