#!/bin/bash
# expected: none
# evaluation only (EleutherAI lm-evaluation-harness on the axolotl LoRA adapter), no training
#SBATCH --job-name=eval-l31-lora
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=32
#SBATCH --mem=200G
#SBATCH --time=02:00:00
#SBATCH --output=logs/eval-%j.out

source ~/envs/lm-eval/bin/activate
export HF_HOME=/scratch/$USER/hf
export HF_DATASETS_TRUST_REMOTE_CODE=1

ADAPTER=/scratch/$USER/axolotl/outputs/llama31-8b-alpaca-lora
OUT=/scratch/$USER/evals/llama31-8b-alpaca-lora

# data-parallel evaluation, one model replica per GPU
accelerate launch --multi_gpu --num_processes 4 -m lm_eval \
    --model hf \
    --model_args pretrained=meta-llama/Llama-3.1-8B,peft=$ADAPTER,dtype=bfloat16 \
    --tasks mmlu,arc_challenge,hellaswag,gsm8k \
    --num_fewshot 5 \
    --batch_size 16 \
    --output_path $OUT \
    --log_samples
