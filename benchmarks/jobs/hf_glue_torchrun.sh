#!/bin/bash
# expected: hf:google-bert/bert-base-cased, 128, 3 epochs
#SBATCH --gres=gpu:4
#SBATCH --time=04:00:00
export TASK_NAME=mrpc
torchrun --nproc_per_node=4 run_glue.py \
  --model_name_or_path google-bert/bert-base-cased \
  --task_name $TASK_NAME \
  --do_train \
  --do_eval \
  --max_seq_length 128 \
  --per_device_train_batch_size 32 \
  --learning_rate 2e-5 \
  --num_train_epochs 3 \
  --output_dir /tmp/$TASK_NAME/
