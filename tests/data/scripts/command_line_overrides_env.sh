#!/bin/bash
#SBATCH -t 10 -p t4
srun hostname
