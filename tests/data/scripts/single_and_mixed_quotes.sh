#!/bin/bash
#SBATCH -J 'a"b'c"d e"
srun hostname
