#!/bin/bash
#SBATCH -t 3
echo hi
#SBATCH -t 9
#SBATCH -J late
srun hostname
