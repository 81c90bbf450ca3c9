#!/bin/bash
#SBATCH --job-n=abbr --part=t4 --tasks-per=1
srun hostname
