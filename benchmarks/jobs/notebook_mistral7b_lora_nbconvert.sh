#!/bin/bash
# expected: hf:mistralai/Mistral-7B-v0.1, 16, 1000 steps
# the notebook notebooks/mistral7b_lora_alpaca.ipynb is converted with nbconvert and run as a script on one GPU;
# its TrainingArguments: per_device_train_batch_size 4 x gradient_accumulation_steps 4 x 1 GPU = 16, max_steps 1000 (PEFT LoRA)
# tatsu-lab/alpaca train: 52,002 rows (dataset card)
#SBATCH --job-name=nb-mistral-lora
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:a100_80g:1
#SBATCH --cpus-per-task=8
#SBATCH --mem=96G
#SBATCH --time=8:00:00
#SBATCH --output=logs/nb-%j.out

source ~/miniconda3/etc/profile.d/conda.sh
conda activate llm

export CUDA_VISIBLE_DEVICES=0
export HF_HOME=/scratch/$USER/hf

cd $SLURM_SUBMIT_DIR
mkdir -p build

jupyter nbconvert --to script notebooks/mistral7b_lora_alpaca.ipynb --output-dir build/
python build/mistral7b_lora_alpaca.py
