#!/bin/bash
#SBATCH -t abc
srun hostname
