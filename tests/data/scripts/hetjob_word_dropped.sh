#!/bin/bash
#SBATCH -t 5 hetjob -J dropped
srun hostname
