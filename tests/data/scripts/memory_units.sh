#!/bin/bash
#SBATCH --mem=4G
srun hostname
