"""Queue-wait estimates for a candidate job: Slurm's ``sbatch --test-only`` and the advisor's own replay of
the queue with predicted run times, each tracked for its error per partition.

``snapshot``, ``remaining``, ``profile``, ``simulate`` and ``accuracy`` are pure; ``collect`` reads the
queue from Slurm and ``estimate`` asks both estimators. Nothing is imported here: a pure module that reads
`advisor.wait.simulate` must not load the Slurm client by importing this package.
"""
