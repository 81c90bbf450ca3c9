#!/bin/bash
#SBATCH -p t4 --gres=gres:gpu:t4:2
srun hostname
