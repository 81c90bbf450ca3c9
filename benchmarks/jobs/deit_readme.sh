#!/bin/bash
# expected: timm:deit_small_patch16_224, 1024, 300 epochs
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH --time=2-00:00:00
python -m torch.distributed.launch --nproc_per_node=8 --use_env main.py --model deit_small_patch16_224 --batch-size 128 --data-path /datasets01/imagenet_full_size/061417/ --output_dir /checkpoint/deit
