#!/bin/bash
#SBATCH -t UNLIMITED
srun hostname
