#!/bin/bash
# expected: timm:convnext_tiny, 4096, 300 epochs
# distributed_train.sh 8 = torchrun --nproc_per_node=8 train.py; -b not given -> timm train.py default batch size 128 (per GPU);
# 128 x --grad-accum-steps 4 x 8 GPUs = 4096. ImageNet-1k train: 1,281,167 images (ILSVRC-2012)
#SBATCH --job-name=convnext-t-in1k
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=96
#SBATCH --mem=0
#SBATCH --exclusive
#SBATCH --time=5-00:00:00
#SBATCH --requeue
#SBATCH --output=logs/%x-%j.out

module load cuda/12.1
source ~/envs/timm/bin/activate

export OMP_NUM_THREADS=4

cd ~/src/pytorch-image-models

RESUME=""
if [ -f output/train/convnext_tiny_in1k/last.pth.tar ]; then
    RESUME="--resume output/train/convnext_tiny_in1k/last.pth.tar"
fi

./distributed_train.sh 8 \
    --data-dir /datasets/imagenet \
    --model convnext_tiny \
    --grad-accum-steps 4 \
    --epochs 300 \
    --opt adamw \
    --lr 4e-3 \
    --weight-decay 0.05 \
    --sched cosine \
    --warmup-epochs 20 \
    --drop-path 0.1 \
    --aa rand-m9-mstd0.5-inc1 \
    --reprob 0.25 \
    --mixup 0.8 \
    --cutmix 1.0 \
    --smoothing 0.1 \
    --model-ema \
    --model-ema-decay 0.9999 \
    --amp \
    --channels-last \
    -j 10 \
    --pin-mem \
    --experiment convnext_tiny_in1k \
    $RESUME
