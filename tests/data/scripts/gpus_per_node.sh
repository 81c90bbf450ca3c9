#!/bin/bash
#SBATCH -p t4 --gpus-per-node=t4:2
srun hostname
