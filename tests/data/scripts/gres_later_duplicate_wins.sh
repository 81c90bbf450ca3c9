#!/bin/bash
#SBATCH -p a100 --gres=gpu:a100:1
#SBATCH --gres=gpu:a100:3
srun hostname
