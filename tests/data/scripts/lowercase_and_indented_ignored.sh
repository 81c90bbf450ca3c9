#!/bin/bash
#sbatch -t 5
  #SBATCH -t 6
#SBATCH -t 7 -J kept
srun hostname
