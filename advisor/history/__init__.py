"""Run times from history: what a job's earlier runs say about its next one (issue 26).

`jobs` holds the records (read from Slurm's accounting or a Parallel Workloads Archive log), `features`
what a job's past says at its submission, `predictor` the learned quantile model and its fallback, `replay`
the evaluation in submission order that `benchmarks/history.py` and `advisor history evaluate` print.
"""
