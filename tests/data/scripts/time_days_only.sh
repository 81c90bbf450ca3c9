#!/bin/bash
#SBATCH -p a100 -t 1-
srun hostname
