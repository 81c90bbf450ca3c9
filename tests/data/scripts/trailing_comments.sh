#!/bin/bash
#SBATCH -t 15 # fifteen minutes
#SBATCH -J "a#b"#rest
#SBATCH -p v100# glued
srun hostname
