#!/bin/bash
# expected: hf:bert-base-uncased, 32, 3 epochs
# user's own train.py (lives in ~/projects/sentiment, not shown): one GPU, --batch-size 32, --epochs 3, no accumulation flag
# IMDB train: 25,000 reviews (stanfordnlp/imdb dataset card)
#SBATCH --job-name=bert-imdb
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=8
#SBATCH --mem=32G
#SBATCH --time=180
#SBATCH --output=bert-imdb-%j.out

set -x

source ~/miniconda3/etc/profile.d/conda.sh
conda activate nlp

export TRANSFORMERS_CACHE=/scratch/$USER/.cache
export TOKENIZERS_PARALLELISM=false

cd ~/projects/sentiment
nvidia-smi

python train.py \
    --model bert-base-uncased \
    --dataset imdb \
    --max-len 256 \
    --batch-size 32 \
    --lr 2e-5 \
    --epochs 3 \
    --seed 42 \
    --output-dir checkpoints/bert-imdb-$SLURM_JOB_ID
