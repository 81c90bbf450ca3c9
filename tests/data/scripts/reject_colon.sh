#!/bin/bash
#SBATCH -J a :
srun hostname
