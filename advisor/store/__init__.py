"""The advisor's SQLite database: one file in WAL mode, shared by the daemon, the CLI and the nightly run.

Each table is defined once, in its own module, by a frozen row type whose fields are its columns
(`advisor.store.table`); rows go in and come out as that type. `Store` (`database`) opens the file (or a
database in memory, for tests), creates every table and keeps the benchmarks' measurements; the ledgers
keep what the service records: predictor versions (`model_versions`), advised jobs (`advised_jobs`) and the
audit (`audit`).
"""

from advisor.store.advised_jobs import AdvisedJobRow, AdvisedJobs
from advisor.store.allreduce import ALLREDUCE, AllReduceRow
from advisor.store.architectures import ARCHITECTURES, ArchitectureRow
from advisor.store.audit import Audit, AuditRow
from advisor.store.database import (
    BUSY_TIMEOUT_S,
    SCHEMA_VERSION,
    BenchmarkCoverage,
    NewerDatabase,
    NoDatabase,
    Store,
)
from advisor.store.layer_measurements import LayerMeasurementRow
from advisor.store.model_versions import ModelRegistry, ModelVersionRow
from advisor.store.step_measurements import StepMeasurementRow
from advisor.store.whole_steps import WHOLE_STEPS, WholeStepRow

__all__ = [
    "ALLREDUCE",
    "ARCHITECTURES",
    "BUSY_TIMEOUT_S",
    "SCHEMA_VERSION",
    "WHOLE_STEPS",
    "AdvisedJobRow",
    "AdvisedJobs",
    "AllReduceRow",
    "ArchitectureRow",
    "Audit",
    "AuditRow",
    "BenchmarkCoverage",
    "LayerMeasurementRow",
    "ModelRegistry",
    "ModelVersionRow",
    "NewerDatabase",
    "NoDatabase",
    "StepMeasurementRow",
    "Store",
    "WholeStepRow",
]
