#!/bin/bash
# expected: hf:Qwen/Qwen2.5-1.5B, 128, 2000 steps
# 4 per device x grad_accum 8 x 4 GPUs (deepspeed --num_gpus 4) = 128; the DeepSpeed JSON uses "auto", so the HF flags decide
# run is bounded by --max_steps 2000 (wikitext-103-raw-v1 train: 1,801,350 rows, HF dataset card Salesforce/wikitext)
#SBATCH --job-name=qwen15b-clm-z3
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:a100:4
#SBATCH --cpus-per-task=48
#SBATCH --mem=400G
#SBATCH --time=1-00:00:00
#SBATCH --output=slurm-%j.out

set -euo pipefail

module load gcc/12.2.0 cuda/12.4
source /project/nlp/envs/ds/bin/activate

export HF_HOME=/project/nlp/hf_cache
export HF_DATASETS_CACHE=/scratch/$USER/datasets
export TOKENIZERS_PARALLELISM=false

EX=$HOME/src/transformers/examples/pytorch
OUT=/scratch/$USER/ckpt/qwen2.5-1.5b-wt103

deepspeed --num_gpus 4 $EX/language-modeling/run_clm.py \
    --deepspeed configs/ds_zero3.json \
    --model_name_or_path Qwen/Qwen2.5-1.5B \
    --torch_dtype bfloat16 \
    --dataset_name wikitext \
    --dataset_config_name wikitext-103-raw-v1 \
    --do_train \
    --do_eval \
    --block_size 2048 \
    --per_device_train_batch_size 4 \
    --per_device_eval_batch_size 4 \
    --gradient_accumulation_steps 8 \
    --max_steps 2000 \
    --learning_rate 2e-5 \
    --lr_scheduler_type cosine \
    --warmup_steps 100 \
    --bf16 \
    --gradient_checkpointing \
    --logging_steps 10 \
    --save_steps 500 \
    --eval_strategy steps \
    --eval_steps 500 \
    --preprocessing_num_workers 32 \
    --output_dir $OUT
