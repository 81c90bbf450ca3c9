#!/bin/bash
#SBATCH --gres=gpu:2:a100
srun hostname
