#!/bin/bash
#SBATCH -J pk -t 25
#SBATCH   PackJob
#SBATCH -t 5
srun hostname
