"""The advisor's SQLite database: one file in WAL mode, shared by the daemon, the CLI and the nightly run.

`Store` (`database`) opens it and keeps the benchmarks' measurements; the ledgers (`ledgers`) keep what the
service records: predictor versions, advised jobs, the audit; `schema` names every table's columns.
"""

from advisor.store.database import (
    BUSY_TIMEOUT_S,
    NewerDatabase,
    NoDatabase,
    Store,
    layer_config_of,
    step_config_of,
)
from advisor.store.ledgers import AdvisedJobs, Audit, ModelRegistry
from advisor.store.schema import SCHEMA_VERSION

__all__ = [
    "BUSY_TIMEOUT_S",
    "SCHEMA_VERSION",
    "AdvisedJobs",
    "Audit",
    "ModelRegistry",
    "NewerDatabase",
    "NoDatabase",
    "Store",
    "layer_config_of",
    "step_config_of",
]
