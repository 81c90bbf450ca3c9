"""Replaying public workloads on a heterogeneous GPU cluster to measure what the advisor's advice is worth.

Three arms (users' habits, Slurm's ``--test-only`` estimate, the advisor) decide for the same arrivals; the
jobs run either on the real sandbox Slurm (sleep jobs, compressed time) or in a discrete-event simulation.
``model`` holds the types every part shares.
"""
