#!/bin/bash
#SBATCH -p t4 -n 2 --gpus-per-task=1
srun hostname
