#!/bin/bash
#SBATCH -J a\ b
srun hostname
