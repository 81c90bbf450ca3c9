#!/bin/bash
# expected: hf:facebook/bart-base, 64, 4 epochs
# single GPU, plain python: BS=16 per device x GA=4 = 64; EPOCHS=4 (all set in shell variables below)
# XSum train: 204,045 documents (EdinburghNLP/xsum dataset card)
#SBATCH --job-name=bart-xsum
#SBATCH --partition=gpu-long
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=8
#SBATCH --mem=48G
#SBATCH --time=720
#SBATCH --output=/home/%u/logs/bart-xsum-%j.out

set -eo pipefail

module load miniconda/24.1
conda activate summ

MODEL=facebook/bart-base
DATASET=EdinburghNLP/xsum
BS=16
GA=4
EPOCHS=4
LR=3e-5
OUT_DIR=/scratch/$USER/summ/bart-base-xsum-bs$((BS*GA))-ep${EPOCHS}

ARGS=(
  --model_name_or_path "$MODEL"
  --dataset_name "$DATASET"
  --text_column document
  --summary_column summary
  --do_train
  --do_eval
  --predict_with_generate
  --max_source_length 512
  --max_target_length 64
  --per_device_train_batch_size "$BS"
  --per_device_eval_batch_size 32
  --gradient_accumulation_steps "$GA"
  --num_train_epochs "$EPOCHS"
  --learning_rate "$LR"
  --lr_scheduler_type linear
  --warmup_ratio 0.03
  --label_smoothing_factor 0.1
  --fp16
  --eval_strategy epoch
  --save_strategy epoch
  --save_total_limit 1
  --logging_steps 100
  --num_beams 4
  --output_dir "$OUT_DIR"
  --overwrite_output_dir
)

echo "Running with: ${ARGS[*]}"
python ~/src/transformers/examples/pytorch/summarization/run_summarization.py "${ARGS[@]}"
