#!/bin/bash
#SBATCH -N 4-2
srun hostname
