#!/bin/bash
# expected: hf:google-bert/bert-base-uncased, 48, 2 epochs
# configs/accelerate/ddp_4gpu.yaml: distributed_type MULTI_GPU, num_processes 4 -> 12 per device x 4 = 48
# SQuAD v1.1 train: 87,599 questions (rajpurkar/squad dataset card); with max_seq_length 384 / doc_stride 128 run_qa makes ~88.5k features
#SBATCH --job-name=squad-bert
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=16
#SBATCH --mem=64G
#SBATCH --time=90:00
#SBATCH --output=logs/squad_%j.out

source $HOME/.venvs/qa/bin/activate

export HF_HOME=$HOME/scratch/hf
export CUDA_DEVICE_ORDER=PCI_BUS_ID

QA_DIR=$HOME/transformers/examples/pytorch/question-answering

accelerate launch --config_file configs/accelerate/ddp_4gpu.yaml \
  $QA_DIR/run_qa.py \
  --model_name_or_path google-bert/bert-base-uncased \
  --dataset_name squad \
  --do_train \
  --do_eval \
  --per_device_train_batch_size 12 \
  --per_device_eval_batch_size 64 \
  --learning_rate 3e-5 \
  --num_train_epochs 2 \
  --max_seq_length 384 \
  --doc_stride 128 \
  --fp16 \
  --save_strategy no \
  --output_dir $HOME/scratch/squad/bert-base-uncased
