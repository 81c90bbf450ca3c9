#!/bin/bash
# expected: hf:gpt2, 128, 5 epochs
# per_device_train_batch_size not passed -> TrainingArguments default 8; 8 x grad_accum 4 x 4 GPUs (torchrun nproc 4) = 128
# wikitext-2-raw-v1 train: 36,718 rows (HF dataset card Salesforce/wikitext); run_clm regroups them into 1024-token blocks
#SBATCH --job-name=gpt2-wt2
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=32
#SBATCH --mem=128G
#SBATCH --time=08:00:00
#SBATCH --output=logs/%x-%j.out
#SBATCH --error=logs/%x-%j.err

module purge
module load cuda/12.1 python/3.11
source $HOME/venvs/hf/bin/activate

export HF_HOME=/scratch/$USER/hf_cache
export OMP_NUM_THREADS=8
export WANDB_PROJECT=gpt2-wikitext

cd $HOME/src/transformers/examples/pytorch/language-modeling

torchrun --standalone --nproc_per_node=4 run_clm.py \
    --model_name_or_path gpt2 \
    --dataset_name wikitext \
    --dataset_config_name wikitext-2-raw-v1 \
    --do_train \
    --do_eval \
    --gradient_accumulation_steps 4 \
    --num_train_epochs 5 \
    --learning_rate 5e-5 \
    --warmup_ratio 0.05 \
    --weight_decay 0.01 \
    --block_size 1024 \
    --fp16 \
    --logging_steps 50 \
    --eval_strategy epoch \
    --save_strategy epoch \
    --save_total_limit 2 \
    --report_to wandb \
    --output_dir /scratch/$USER/runs/gpt2-wikitext2 \
    --overwrite_output_dir
