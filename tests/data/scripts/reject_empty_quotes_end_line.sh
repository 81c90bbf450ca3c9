#!/bin/bash
#SBATCH --comment '' -J x
srun hostname
