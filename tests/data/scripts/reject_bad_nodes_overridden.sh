#!/bin/bash
#SBATCH -N x
srun hostname
