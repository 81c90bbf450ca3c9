#!/bin/bash
#SBATCH -J y -- -J x
srun hostname
