"""An advised job array, once all its tasks ended, as one advised job's outcome. Pure.

Each task was predicted as the job (`advisor.recommend.arrays`): the array's run is its tasks' median, its
start the first task's (what the wait was predicted for), its end the last task's.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from datetime import datetime

from advisor.slurm.models import FinishedJob

ENDED = "ENDED"
"""An array whose tasks all ended, not all in the same state (its tasks say how)."""


def ended_state(states: Iterable[str]) -> str:
    """An ended array's state: the one its tasks all ended in, else ENDED."""
    distinct = set(states)
    return distinct.pop() if len(distinct) == 1 else ENDED


ArrayOutcome = tuple[int, str, float, datetime, datetime | None]
"""An ended array as its advised job's record: id, state, elapsed seconds, end and start."""


def array_outcome(job_id: int, tasks: Sequence[FinishedJob]) -> ArrayOutcome:
    """``tasks``: the array's, all ended."""
    starts = [task.start_time for task in tasks if task.start_time is not None]
    return (
        job_id,
        ended_state(task.state for task in tasks),
        statistics.median(task.elapsed.total_seconds() for task in tasks),
        max(task.end_time for task in tasks),
        min(starts, default=None),
    )
