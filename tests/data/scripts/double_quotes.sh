#!/bin/bash
#SBATCH -J "two words" -p t4
srun hostname
