#!/bin/bash
#SLURM -t 9 -J oldprefix
srun hostname
