#!/bin/bash
#PBS -N pbsname
#SBATCH -J mine
srun hostname
