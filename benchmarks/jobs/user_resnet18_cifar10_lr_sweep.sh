#!/bin/bash
# expected: resnet18, 128, 30 epochs
# sbatch --array sweep: the array index picks only the learning rate (5 values); every task fine-tunes the same
# ImageNet-pretrained torchvision resnet18 on CIFAR-10 on one GPU with --batch-size 128 for --epochs 30 (user's own script).
# CIFAR-10 train: 50,000 images (Krizhevsky 2009 / torchvision.datasets.CIFAR10)
#SBATCH --job-name=r18-c10-lr
#SBATCH --array=0-4%3
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=6
#SBATCH --mem=16G
#SBATCH --time=6:00:00
#SBATCH --output=logs/r18-c10-%A_%a.out

module load python/3.10 cuda/11.8
source ~/venvs/cv/bin/activate

export CUDA_VISIBLE_DEVICES=0

LRS=(0.1 0.05 0.01 0.005 0.001)
LR=${LRS[$SLURM_ARRAY_TASK_ID]}

cd ~/projects/cifar-finetune

python finetune_cifar10.py \
    --arch resnet18 \
    --pretrained \
    --data-dir /scratch/$USER/data/cifar10 \
    --img-size 224 \
    --batch-size 128 \
    --epochs 30 \
    --optimizer sgd \
    --lr $LR \
    --momentum 0.9 \
    --wd 5e-4 \
    --amp \
    --out runs/resnet18_lr${LR}
