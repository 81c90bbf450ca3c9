"""advisor: predicts GPU training time per partition and advises Slurm submissions."""

__version__ = "0.1.0"
