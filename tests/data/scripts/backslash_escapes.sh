#!/bin/bash
#SBATCH -J a\"b\\c
srun hostname
