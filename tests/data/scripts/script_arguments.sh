#!/bin/bash
#SBATCH -J args
srun hostname
