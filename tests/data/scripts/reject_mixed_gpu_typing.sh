#!/bin/bash
#SBATCH --gres=gpu:t4:1,gpu:2
srun hostname
