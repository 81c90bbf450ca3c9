#!/bin/bash
#SBATCH -vJglued -pt4
srun hostname
