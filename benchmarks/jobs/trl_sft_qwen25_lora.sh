#!/bin/bash
# expected: hf:Qwen/Qwen2.5-1.5B, 64, 1 epochs
# trl sft --config configs/trl/sft_qwen25_ultrachat.yaml: num_processes 2 (passed on to accelerate launch);
# per_device_train_batch_size not set -> TrainingArguments/SFTConfig default 8; 8 x gradient_accumulation_steps 4 x 2 = 64;
# num_train_epochs 1; packing off (SFTConfig default False), so one sample = one conversation.
# HuggingFaceH4/ultrachat_200k split train_sft: 207,865 rows (dataset card)
#SBATCH --job-name=trl-sft-qwen
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=2
#SBATCH --cpus-per-task=16
#SBATCH --mem=128G
#SBATCH --time=0-08:00:00
#SBATCH --output=logs/%x-%j.out

source ~/.bashrc
conda activate trl

export HF_HOME=/scratch/$USER/hf
export WANDB_PROJECT=qwen-sft
export TOKENIZERS_PARALLELISM=false

trl sft --config configs/trl/sft_qwen25_ultrachat.yaml
