#!/bin/bash
#SBATCH --job-name=basic
#SBATCH --partition=a100
#SBATCH --time=30
#SBATCH --gres=gpu:a100:2
srun hostname
