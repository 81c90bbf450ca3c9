#!/bin/bash
#SBATCH -t 90
srun hostname
