#!/bin/bash
# expected: hf:FacebookAI/roberta-base, 256, 20000 steps
# accelerate launch --multi_gpu --num_processes 8: 32 per device x 8 processes (grad_accum default 1) = 256; bounded by --max_steps 20000
# wikitext-103-raw-v1 train: 1,801,350 rows (HF dataset card Salesforce/wikitext)
#SBATCH --job-name=roberta-mlm
#SBATCH --account=nlp-lab
#SBATCH --partition=a100
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --mem=0
#SBATCH --exclusive
#SBATCH --time=1-12:00
#SBATCH --output=%x-%j.out

module load anaconda3/2024.02
conda activate /project/nlp-lab/envs/torch24

export HF_HOME=/project/nlp-lab/.hf
export HF_DATASETS_OFFLINE=1
export TRANSFORMERS_OFFLINE=1

cd /project/nlp-lab/$USER/mlm-continued-pretraining

accelerate launch --multi_gpu --num_processes 8 --mixed_precision bf16 \
    ~/transformers/examples/pytorch/language-modeling/run_mlm.py \
    --model_name_or_path FacebookAI/roberta-base \
    --dataset_name wikitext \
    --dataset_config_name wikitext-103-raw-v1 \
    --do_train \
    --do_eval \
    --max_seq_length 512 \
    --mlm_probability 0.15 \
    --per_device_train_batch_size 32 \
    --per_device_eval_batch_size 32 \
    --max_steps 20000 \
    --learning_rate 1e-4 \
    --warmup_steps 1000 \
    --weight_decay 0.01 \
    --adam_beta2 0.98 \
    --bf16 \
    --dataloader_num_workers 6 \
    --logging_steps 100 \
    --save_steps 2500 \
    --eval_strategy steps \
    --eval_steps 2500 \
    --output_dir outputs/roberta-base-wt103-mlm
