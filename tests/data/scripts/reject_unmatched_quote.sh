#!/bin/bash
#SBATCH -J 'abc
srun hostname
