#!/bin/bash
#SBATCH -t infinite
srun hostname
