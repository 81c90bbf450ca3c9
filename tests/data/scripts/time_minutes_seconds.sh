#!/bin/bash
#SBATCH -t 5:30
srun hostname
