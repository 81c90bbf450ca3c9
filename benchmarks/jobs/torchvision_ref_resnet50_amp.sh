#!/bin/bash
# expected: resnet50, 256, 90 epochs
# pytorch/vision references/classification/train.py: -b/--batch-size default 32 images per GPU ("the total batch size is
# $NGPU x batch_size"), --epochs default 90; torchrun --nproc_per_node=8 -> 32 x 8 = 256.
# ImageNet-1k train: 1,281,167 images (ILSVRC-2012)
#SBATCH --job-name=tv-resnet50
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --mem=400G
#SBATCH --time=3-12:00:00
#SBATCH --output=logs/tv-r50-%j.out

module load cuda/12.1
source ~/anaconda3/etc/profile.d/conda.sh
conda activate tv

OUT=/scratch/$USER/tv_ref/resnet50_amp
mkdir -p $OUT
RESUME_ARGS=()
[ -f $OUT/checkpoint.pth ] && RESUME_ARGS=(--resume $OUT/checkpoint.pth)

cd $HOME/src/vision/references/classification

# classic ResNet recipe from the references README, plus AMP
torchrun --nproc_per_node=8 train.py \
    --model resnet50 \
    --data-path /datasets/imagenet \
    --amp \
    --workers 8 \
    --output-dir $OUT \
    "${RESUME_ARGS[@]}"
