"""The Philly trace as a replay workload, for the discrete-event mode at scale (82,247 jobs over 109 days).

Each Philly job arrives when it was submitted, asks its own GPU count and runs its own recorded duration.
Philly does not record the model or the batch: each job takes the application and the per-GPU batch of a
Sia arrival drawn for it (seeded), so the step-time table can say how fast it runs anywhere. Jobs whose
configuration runs on no GPU type of the table (more GPUs than any measured placement) are left out and
counted.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np

from benchmarks.harness.model import Arrival
from benchmarks.harness.truth import StepTable
from benchmarks.harness.workload import Habits, WorkloadError, user_step_times


def load_philly_arrivals(
    path: Path, mix: Sequence[Arrival], table: StepTable, habits: Habits, seed: int, limit: int | None = None
) -> tuple[list[Arrival], int]:
    """The first ``limit`` jobs of the trace in submission order (all without a limit) as arrivals, and how
    many of them were left out because they run nowhere."""
    if not mix:
        raise WorkloadError("no Sia arrivals to draw applications and batches from")
    records = _records(path)[:limit]
    first = records[0][0] if records else 0.0
    arrivals, left_out = [], 0
    for index, (submitted, duration, gpus) in enumerate(records):
        model = mix[int(np.random.default_rng([seed, index]).integers(len(mix)))]
        per_gpu = max(1, round(model.global_batch / model.gpus))
        arrival = Arrival(
            name=f"philly-{index}",
            time_s=submitted - first,
            application=model.application,
            gpus=gpus,
            global_batch=per_gpu * gpus,
            duration_s=duration,
        )
        if user_step_times(arrival, table, habits):
            arrivals.append(arrival)
        else:
            left_out += 1
    return arrivals, left_out


def _records(path: Path) -> list[tuple[float, float, int]]:
    """(submitted, duration, GPUs) of every job that ran, in submission order."""
    records = []
    with path.open(newline="") as handle:
        for line, record in enumerate(csv.DictReader(handle), start=2):
            try:
                submitted = datetime.fromisoformat(record["timestamp"]).timestamp()
                duration, gpus = float(record["duration"]), int(record["num_gpus"])
            except (KeyError, TypeError, ValueError) as error:
                raise WorkloadError(f"{path}:{line}: {error!r}") from error
            if duration > 0 and gpus > 0:
                records.append((submitted, duration, gpus))
    return sorted(records)
