#!/bin/bash
#SBATCH -t 1:2:3:4
srun hostname
