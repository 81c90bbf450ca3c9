"""A candidate's wait as both sources estimate it, and which source to trust per partition, judged by how far
each has been from real starts."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Literal

from advisor.frozen import Frozen

WaitSource = Literal["slurm", "advisor"]
"""Where a wait comes from: Slurm's ``--test-only`` or the advisor's own replay of the queue."""
#: Slurm's own estimate is the default: it is what users already see, so it needs no track record.
DEFAULT_SOURCE: WaitSource = "slurm"
#: Fewer records than this per source and partition say too little to switch away from the default.
MIN_RECORDS = 5


class WaitEstimate(Frozen):
    """Both sources' waits for one candidate (None: that source could not say) and the one that has been
    right more often on its partition; ``slurm_error`` says why Slurm gave none."""

    slurm_wait_s: float | None
    advisor_wait_s: float | None
    preferred: WaitSource
    slurm_error: str | None = None

    @property
    def wait_s(self) -> float | None:
        """The preferred source's wait, or the other's where it has none."""
        return preferred_wait(self.slurm_wait_s, self.advisor_wait_s, self.preferred)


def preferred_wait(
    slurm_wait_s: float | None, advisor_wait_s: float | None, preferred: WaitSource
) -> float | None:
    """The ``preferred`` source's wait, or the other's where it has none: the rule every wait shown keeps."""
    first, second = (slurm_wait_s, advisor_wait_s) if preferred == "slurm" else (advisor_wait_s, slurm_wait_s)
    return first if first is not None else second


class WaitRecord(Frozen):
    """One estimate set against what happened: the job's predicted and actual start. ``estimator``: its
    source (the stored column's name)."""

    estimator: WaitSource
    partition: str
    predicted_start: datetime
    actual_start: datetime

    @property
    def error_s(self) -> float:
        return abs((self.predicted_start - self.actual_start).total_seconds())


class SourceAccuracy(Frozen):
    """How far one source's starts have been from the real ones on one partition."""

    source: WaitSource
    partition: str
    records: int
    median_abs_error_s: float


def accuracies(records: Iterable[WaitRecord]) -> list[SourceAccuracy]:
    """Median absolute start error per source and partition, sorted by partition then source."""
    errors: dict[tuple[str, WaitSource], list[float]] = defaultdict(list)
    for record in records:
        errors[record.partition, record.estimator].append(record.error_s)
    return [
        SourceAccuracy(
            source=source,
            partition=partition,
            records=len(values),
            median_abs_error_s=statistics.median(values),
        )
        for (partition, source), values in sorted(errors.items())
    ]


def preferred_sources(records: Iterable[WaitRecord], min_records: int = MIN_RECORDS) -> dict[str, WaitSource]:
    """Per partition with records, the source with the smaller median error.

    Both need ``min_records`` records to be compared; otherwise, and on a tie, Slurm's stays.
    """
    by_partition: dict[str, dict[WaitSource, SourceAccuracy]] = defaultdict(dict)
    for accuracy in accuracies(records):
        by_partition[accuracy.partition][accuracy.source] = accuracy
    return {
        partition: _better(found.get("slurm"), found.get("advisor"), min_records)
        for partition, found in by_partition.items()
    }


def _better(slurm: SourceAccuracy | None, advisor: SourceAccuracy | None, min_records: int) -> WaitSource:
    if slurm is None or advisor is None or min(slurm.records, advisor.records) < min_records:
        return DEFAULT_SOURCE
    return "advisor" if advisor.median_abs_error_s < slurm.median_abs_error_s else "slurm"
