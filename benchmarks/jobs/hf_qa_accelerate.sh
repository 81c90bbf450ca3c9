#!/bin/bash
# expected: hf:google-bert/bert-base-uncased, 96, 2 epochs
#SBATCH --gres=gpu:8
#SBATCH --time=06:00:00
accelerate launch --multi_gpu --num_processes 8 --mixed_precision fp16 run_qa_no_trainer.py \
  --model_name_or_path google-bert/bert-base-uncased \
  --dataset_name squad \
  --max_seq_length 384 \
  --doc_stride 128 \
  --output_dir ~/tmp/debug_squad \
  --per_device_train_batch_size 12 \
  --learning_rate 3e-5 \
  --num_train_epochs 2
