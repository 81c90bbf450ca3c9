#!/bin/bash
#SBATCH -p a100 -t 1-2:30
srun hostname
