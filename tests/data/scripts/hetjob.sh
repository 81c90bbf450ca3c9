#!/bin/bash
#SBATCH -J first -p t4 -t 20
#SBATCH hetjob
#SBATCH -J second -p v100
srun hostname
