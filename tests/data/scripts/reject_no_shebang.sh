#SBATCH -t 5
srun hostname
