#!/bin/bash
#SBATCH --job-n=abbr --part=t4 --ti=1:00:00
srun hostname
