"""Read batch scripts and sbatch command lines exactly as sbatch 22.05 does, so advice never rests on a
request sbatch would have read differently (or refused)."""
