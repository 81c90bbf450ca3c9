#!/bin/bash
#SBATCH -p a100 -N 2 --ntasks-per-node=2 -c 4
srun hostname
