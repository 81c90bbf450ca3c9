#!/bin/bash
#SBATCH -p a100 --gres=gpu:2
srun hostname
