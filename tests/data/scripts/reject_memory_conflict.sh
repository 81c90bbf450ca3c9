#!/bin/bash
#SBATCH --mem=1G
srun hostname
