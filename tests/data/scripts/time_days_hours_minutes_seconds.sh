#!/bin/bash
#SBATCH -p a100 -t 1-0:0:30
srun hostname
