#!/bin/bash
#SBATCH -p a100 --gpus=a100:4
srun hostname
