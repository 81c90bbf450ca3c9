#!/bin/bash
#SBATCH--time=12
#SBATCH	-J	tabs
srun hostname
