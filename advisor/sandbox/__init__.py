"""A real Slurm cluster on one machine, for tests, demos and the replay benchmark."""
