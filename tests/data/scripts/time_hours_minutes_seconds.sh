#!/bin/bash
#SBATCH -t 1:02:03
srun hostname
