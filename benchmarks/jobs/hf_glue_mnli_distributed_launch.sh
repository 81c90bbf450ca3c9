#!/bin/bash
# expected: hf:bert-base-cased, 128, 3 epochs
# python -m torch.distributed.launch --nproc_per_node=4: 32 per device x 4 processes = 128
# GLUE MNLI train: 392,702 examples (GLUE / HF nyu-mll/glue dataset card)
#SBATCH --job-name=mnli-bert
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:v100:4
#SBATCH --cpus-per-task=20
#SBATCH --mem=64G
#SBATCH --time=2880
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=%u@cs.example.edu

module load python/3.10 cuda/11.8 cudnn/8.6
source ~/envs/glue/bin/activate

export TASK_NAME=mnli
export HF_HOME=/scratch/$USER/hf

cd ~/transformers/examples/pytorch/text-classification

python -m torch.distributed.launch --nproc_per_node=4 --master_port=29501 run_glue.py \
  --model_name_or_path bert-base-cased \
  --task_name $TASK_NAME \
  --do_train \
  --do_eval \
  --max_seq_length 128 \
  --per_device_train_batch_size 32 \
  --learning_rate 2e-5 \
  --num_train_epochs 3 \
  --fp16 \
  --save_steps 5000 \
  --output_dir /scratch/$USER/glue/$TASK_NAME/
