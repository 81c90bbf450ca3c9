#!/bin/bash
#SBATCH -p a100 --gres=gpu:x:y
srun hostname
