#!/bin/bash
#SBATCH -p v100 -G v100:1
srun hostname
