"""Adapter between the advisor and Slurm's command-line tools (locally or over SSH)."""

from advisor.slurm.client import SlurmClient
from advisor.slurm.models import (
    FinishedJob,
    Gpus,
    Node,
    Partition,
    QueuedJob,
    Record,
    SubmitResult,
    TestOnlyResult,
)
from advisor.slurm.runner import (
    CommandResult,
    LocalRunner,
    Runner,
    SlurmError,
    SshRunner,
    clean_environment,
    runner_for,
)

__all__ = [
    "CommandResult",
    "FinishedJob",
    "Gpus",
    "LocalRunner",
    "Node",
    "Partition",
    "QueuedJob",
    "Record",
    "Runner",
    "SlurmClient",
    "SlurmError",
    "SshRunner",
    "SubmitResult",
    "TestOnlyResult",
    "clean_environment",
    "runner_for",
]
