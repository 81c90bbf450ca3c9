#!/bin/bash
#SBATCH 'hetjob'
srun hostname
