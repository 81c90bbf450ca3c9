#!/bin/bash
# expected: none
#SBATCH --partition=gpu
#SBATCH --gres=gpu:4
#SBATCH --time=1-00:00:00
srun python train.py --config configs/exp.yaml
