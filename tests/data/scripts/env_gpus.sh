#!/bin/bash
#SBATCH -J envgpu
srun hostname
