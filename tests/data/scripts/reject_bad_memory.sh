#!/bin/bash
#SBATCH --mem=1.5G
srun hostname
