#!/bin/bash
#SBATCH -n 0
srun hostname
