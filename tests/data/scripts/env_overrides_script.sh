#!/bin/bash
#SBATCH -t 10 -p t4 -J fromscript
srun hostname
