#!/bin/bash
#SBATCH -p t4 --gres=gpu
srun hostname
