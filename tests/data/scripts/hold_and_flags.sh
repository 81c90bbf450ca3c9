#!/bin/bash
#SBATCH -H --requeue --exclusive=user -J flags
srun hostname
