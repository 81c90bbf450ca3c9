#!/bin/bash
#SBATCH --foo=1
srun hostname
