#!/bin/bash
#SBATCH -p v100 --gres=gpu:v100:1
srun hostname
