"""Queue-wait estimates for a candidate job: Slurm's ``sbatch --test-only`` and the advisor's own replay of
the queue with predicted run times, each tracked for its error per partition.

``snapshot``, ``remaining``, ``profile``, ``simulate`` and ``accuracy`` are pure; ``collect`` reads the
queue from Slurm and ``estimate`` asks both estimators.
"""

from advisor.wait.accuracy import (
    Estimator,
    EstimatorError,
    WaitRecord,
    estimator_errors,
    preferred_estimators,
)
from advisor.wait.estimate import WaitEstimate, WaitRequest, estimate_waits, sbatch_options
from advisor.wait.remaining import RatioTable, RuntimeEstimates, estimate_runtimes, historical_ratios
from advisor.wait.simulate import predict_starts
from advisor.wait.snapshot import Allocation, PendingJob, QueueSnapshot, RunningJob, SlotRequest, SnapshotNode

__all__ = [
    "Allocation",
    "Estimator",
    "EstimatorError",
    "PendingJob",
    "QueueSnapshot",
    "RatioTable",
    "RunningJob",
    "RuntimeEstimates",
    "SlotRequest",
    "SnapshotNode",
    "WaitEstimate",
    "WaitRecord",
    "WaitRequest",
    "estimate_runtimes",
    "estimate_waits",
    "estimator_errors",
    "historical_ratios",
    "predict_starts",
    "preferred_estimators",
    "sbatch_options",
]
