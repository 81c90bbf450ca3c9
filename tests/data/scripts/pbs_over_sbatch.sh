#!/bin/sh
#SBATCH -p t4
#SBATCH -t 10
#PBS -q v100
#PBS -l walltime=01:30:00
true
