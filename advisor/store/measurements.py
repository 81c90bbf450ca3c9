"""The columns the measurement tables share: a benchmark's (``step_measurements``, ``layer_measurements``)
and a communication benchmark's (``allreduce``, ``whole_steps``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from advisor.frozen import Frozen
from advisor.records import ResultLine


class MeasurementRow(Frozen):
    key: str
    """The line's content key (`ResultLine.key`): ingesting it twice stores one row."""
    run_id: str
    fingerprint: str
    """The `FingerprintRow` key of the node it ran on."""
    machine: str
    measured_at: datetime
    median_s: float | None
    """None where it did not fit."""
    fits: bool
    error: str | None = None


def measured(line: ResultLine, median_s: float | None, fits: bool, error: str | None) -> dict[str, Any]:
    """`MeasurementRow`'s fields of one result line."""
    fingerprint = line.fingerprint
    return {
        "key": line.key(),
        "run_id": line.run_id,
        "fingerprint": fingerprint.key(),
        "machine": fingerprint.machine(),
        "measured_at": line.measured_at,
        "median_s": median_s,
        "fits": fits,
        "error": error,
    }


class CommunicationRow(Frozen):
    key: str
    partition: str
    machine: str
    network: str
    measured_at: datetime
    devices: int
    nodes: int
