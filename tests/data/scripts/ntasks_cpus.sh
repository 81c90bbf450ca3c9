#!/bin/bash
#SBATCH -p v100 -n 4 --cpus-per-task=2
srun hostname
