#!/bin/bash
#SBATCH --mem-per-cpu=2G -J memenv
srun hostname
