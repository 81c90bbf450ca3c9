#!/bin/bash
#SBATCH -p a100 --gpus=2
srun hostname
