#!/bin/bash
#SBATCH -p a100,v100 --gres=gpu:1
srun hostname
