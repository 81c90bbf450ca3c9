"""Whether real Slurm's backfill plan is a function of the queue: its slots pass by pass, from slurmctld.

Slurm's will-run test walks every partition's running jobs, so a partition's plan can change with a
start or an end in another (the twin replans its neighbours then), but not with nothing started or ended
anywhere. This reads a slurmctld log written with ``DebugFlags=Backfill`` (``scontrol setdebugflags
+Backfill`` on a running sandbox): each pass's ``_dump_job_sched`` lines (a pending job's planned start
and nodes), and counts, over consecutive passes with no event in a partition between them, how often the
partition's first planned job kept its slot and how often Slurm moved it, and of the moves how many had
no start or end in any partition between. Usage: ``python -m benchmarks.harness.backfill_log LOG...``.
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
    quiet: int = 0
    """Moves with no start or end in any partition between the passes: Slurm's will-run test walks every
    partition's running jobs, so a start or an end elsewhere can move a slot; these it cannot explain."""


def read(lines: Iterable[str]) -> tuple[list[_Pass], list[tuple[float, int, bool]], dict[int, str]]:
    """The passes, the events (time, job, whether it started or ended: not a submission) and each job's
    partition, as far as the log names them."""
    passes: list[_Pass] = []
    events: list[tuple[float, int, bool]] = []
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
            events.append((at, job, True))
        elif ended := _END.search(text):
            events.append((at, int(ended[1]), True))
        elif submitted := _SUBMIT.search(text):
            events.append((at, int(submitted[1]), False))
    return passes, events, partition


def stability(lines: Iterable[str]) -> Stability:
    """Consecutive passes, per partition, with the same first planned job and no event between them."""
    passes, events, partition = read(lines)
    touched = [(at, partition.get(job), ran) for at, job, ran in events]
    kept, moved, quiet = 0, [], 0
    for before, after in itertools.pairwise(passes):
        between = [(where, ran) for at, where, ran in touched if before.at <= at < after.at]
        for name, slot in before.first.items():
            later = after.first.get(name)
            if later is None or later[0] != slot[0] or any(where == name for where, _ in between):
                continue
            if later == slot:
                kept += 1
            else:
                moved.append((name, slot, later))
                quiet += not any(ran for _, ran in between)
    return Stability(kept, moved, quiet)


def main(argv: Sequence[str] | None = None) -> int:
    for path in sys.argv[1:] if argv is None else argv:
        with Path(path).open() as log:
            found = stability(log)
        print(
            f"{path}: the first planned job's slot, passes with no event in its partition between: "
            f"kept {found.kept}, moved {len(found.moved)} "
            f"({found.quiet} with no start or end in any partition)"
        )
        for name, slot, later in found.moved[:4]:
            print(f"  {name}: job {slot[0]} from {slot[1]} on {slot[2]} to {later[1]} on {later[2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
