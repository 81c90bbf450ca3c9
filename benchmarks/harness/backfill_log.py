"""Whether real Slurm's backfill plan is a function of the queue: its slots pass by pass, from slurmctld.

The replay's twin plans each partition from its jobs alone, so between two events of a partition (a
submission, a start, an end) its plan cannot change. This reads a slurmctld log written with
``DebugFlags=Backfill`` (``scontrol setdebugflags +Backfill`` on a running sandbox): each pass's
``_dump_job_sched`` lines (a pending job's planned start and nodes), and counts, over consecutive passes
with no event in a partition between them, how often the partition's first planned job kept its slot and
how often Slurm moved it. Usage: ``python -m benchmarks.harness.backfill_log LOG...``.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

_LINE = re.compile(r"\[(\S+)\] (.*)")
_SLOT = re.compile(
    r"_dump_job_sched: JobId=(\d+) to start at (\S+), end at \S+ on nodes (\S+) in partition (\S+)"
)
_START = re.compile(
    r"(?:Allocate JobId=(\d+) NodeList=\S+ .*Partition=(\S+))|(?:Started JobId=(\d+) in (\S+))"
)
_END = re.compile(r"_job_complete: JobId=(\d+) done")
_SUBMIT = re.compile(r"submit_batch_job: JobId=(\d+)")

#: A pending job's slot in one pass: job, planned start, nodes.
Slot = tuple[int, str, str]


@dataclass(slots=True)
class _Pass:
    at: float
    first: dict[str, Slot] = field(default_factory=dict)
    """Per partition, the first job the pass planned a later slot for."""


@dataclass(frozen=True, slots=True)
class Stability:
    kept: int
    moved: list[tuple[str, Slot, Slot]]


def read(lines: Iterable[str]) -> tuple[list[_Pass], list[tuple[float, int]], dict[int, str]]:
    """The passes, the events (time, job) and each job's partition, as far as the log names them."""
    passes: list[_Pass] = []
    events: list[tuple[float, int]] = []
    partition: dict[int, str] = {}
    for line in lines:
        match = _LINE.match(line)
        if match is None:
            continue
        at, text = datetime.fromisoformat(match[1]).timestamp(), match[2]
        if "_attempt_backfill: beginning" in text:
            passes.append(_Pass(at))
        elif slot := _SLOT.search(text):
            job = int(slot[1])
            partition[job] = slot[4]
            if passes:
                passes[-1].first.setdefault(slot[4], (job, slot[2], slot[3]))
        elif start := _START.search(text):
            job = int(start[1] or start[3])
            partition[job] = start[2] or start[4]
            events.append((at, job))
        elif other := _END.search(text) or _SUBMIT.search(text):
            events.append((at, int(other[1])))
    return passes, events, partition


def stability(lines: Iterable[str]) -> Stability:
    """Consecutive passes, per partition, with the same first planned job and no event between them."""
    passes, events, partition = read(lines)
    touched = [(at, partition.get(job)) for at, job in events]
    kept, moved = 0, []
    for before, after in itertools.pairwise(passes):
        for name, slot in before.first.items():
            later = after.first.get(name)
            if later is None or later[0] != slot[0]:
                continue
            if any(before.at <= at < after.at and where == name for at, where in touched):
                continue
            if later == slot:
                kept += 1
            else:
                moved.append((name, slot, later))
    return Stability(kept, moved)


def main(argv: Sequence[str] | None = None) -> int:
    for path in sys.argv[1:] if argv is None else argv:
        with Path(path).open() as log:
            found = stability(log)
        print(
            f"{path}: the first planned job's slot, passes with no event in its partition between: "
            f"kept {found.kept}, moved {len(found.moved)}"
        )
        for name, slot, later in found.moved[:4]:
            print(f"  {name}: job {slot[0]} from {slot[1]} on {slot[2]} to {later[1]} on {later[2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
