#!/bin/bash
#SBATCH -t 60 --time-min=30
srun hostname
