#!/bin/bash
# expected: hf:EleutherAI/pythia-160m, 128, 5000 steps
# fabric run --devices=4 -> 4 processes; fabric_lm/train.py: --micro-batch-size is per device, --grad-accum micro-batches per
# optimizer step, --max-steps counts optimizer steps: 8 x 4 x 4 = 128 sequences of 1024 tokens, 5000 steps
# wikitext-103-raw-v1 train: 1,801,350 rows (HF dataset card Salesforce/wikitext)
#SBATCH --job-name=fabric-pythia
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:l40s:4
#SBATCH --cpus-per-task=32
#SBATCH --mem=128G
#SBATCH --time=06:00:00
#SBATCH --output=logs/fabric-%j.out

source ~/micromamba/etc/profile.d/micromamba.sh
micromamba activate fabric

export HF_HOME=/scratch/$USER/hf
export OMP_NUM_THREADS=8

cd $SLURM_SUBMIT_DIR/fabric_lm

fabric run \
    --accelerator=cuda \
    --devices=4 \
    --strategy=ddp \
    --precision=bf16-mixed \
    train.py \
    --model EleutherAI/pythia-160m \
    --dataset wikitext --dataset-config wikitext-103-raw-v1 \
    --seq-len 1024 \
    --micro-batch-size 8 \
    --grad-accum 4 \
    --max-steps 5000 \
    --lr 6e-4 \
    --warmup-steps 250 \
    --out /scratch/$USER/fabric/pythia160m-wt103
