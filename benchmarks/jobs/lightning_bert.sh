#!/bin/bash
# expected: hf:bert-base-uncased, 32, 1000 steps
#SBATCH --gres=gpu:1
#SBATCH --time=04:00:00
python train.py fit --model.model_name_or_path=bert-base-uncased --data.batch_size=32 --trainer.max_steps=1000
