#!/bin/bash
#SBATCH -p a100 -N 2-4
srun hostname
