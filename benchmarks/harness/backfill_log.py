"""Whether real Slurm's backfill plan is a function of the queue: its slots pass by pass, from slurmctld.

Slurm's will-run test walks every partition's running jobs, so a partition's plan can change with a
start or an end in another (the twin replans its neighbours then), but not with nothing started or ended
anywhere. This reads a slurmctld log written with ``DebugFlags=Backfill`` (``scontrol setdebugflags
+Backfill`` on a running sandbox): each pass's ``_dump_job_sched`` lines (a pending job's planned start
and nodes), and counts, over consecutive passes with no event in a partition between them, how often the
partition's first planned job kept its slot and how often Slurm moved it, and of the moves how many had
no start or end in any partition between. Usage: ``python -m benchmarks.harness.backfill_log LOG...``.

The twin of a real run reads the same log for what its outcomes do not say (`arm_log`): when each
backfill pass began, and how long each job held its nodes past its run.
"""

from __future__ import annotations

import bisect
import itertools
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from benchmarks.harness.model import ArmLog, ArmName, ReplayOutcome

_LINE = re.compile(r"\[(\S+)\] (.*)")
_SLOT = re.compile(
    r"_dump_job_sched: JobId=(\d+) to start at (\S+), end at \S+ on nodes (\S+) in partition (\S+)"
)
_START = re.compile(
    r"(?:Allocate JobId=(\d+) NodeList=\S+ .*Partition=(\S+))|(?:Started JobId=(\d+) in (\S+))"
)
_END = re.compile(r"_job_complete: JobId=(\d+) done")
_SUBMIT = re.compile(r"submit_batch_job: JobId=(\d+)")

Event = Literal["submit", "start", "end"]

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


def read(lines: Iterable[str]) -> tuple[list[_Pass], list[tuple[float, int, Event]], dict[int, str]]:
    """The passes, the events (time, job, what) and each job's partition, as far as the log names them."""
    passes: list[_Pass] = []
    events: list[tuple[float, int, Event]] = []
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
            events.append((at, job, "start"))
        elif ended := _END.search(text):
            events.append((at, int(ended[1]), "end"))
        elif submitted := _SUBMIT.search(text):
            events.append((at, int(submitted[1]), "submit"))
    return passes, events, partition


def arm_log(lines: Iterable[str], outcomes: Sequence[ReplayOutcome], compression: float) -> ArmLog:
    """One arm's passes and its jobs' holds past their runs (`ArmLog`), in the workload's seconds of the
    run's clock (`ReplayOutcome.real_zero_s`); a job that ran twice is judged by its first run."""
    zero = next((o.real_zero_s for o in outcomes if o.real_zero_s is not None), None)
    if zero is None:
        return ArmLog()
    passes, events, _ = read(lines)
    begun = [found.at for found in passes]
    started = {job: at for at, job, kind in events if kind == "start"}
    ended = {job: at for at, job, kind in events if kind == "end"}
    held = {}
    for o in outcomes:
        if o.job_id in started and o.job_id in ended:
            # From the pass that started it: the twin starts a job at its pass's beginning.
            latest = bisect.bisect_right(begun, started[o.job_id]) - 1
            at = begun[latest] if latest >= 0 else started[o.job_id]
            ran = min(o.true_run_s, o.decision.time_limit_s)
            held[o.name] = (ended[o.job_id] - at) * compression - ran
    return ArmLog(passes_s=tuple((at - zero) * compression for at in begun), held_s=held)


def run_logs(
    root: Path, real: Mapping[ArmName, Sequence[ReplayOutcome]], compression: float
) -> dict[ArmName, ArmLog]:
    """Each arm's `arm_log` in a real run whose sandboxes live in ``root`` (``ROOT/ARM/log``); an arm
    without a log has none."""
    found: dict[ArmName, ArmLog] = {}
    for arm, outcomes in real.items():
        log = root / arm / "log" / "slurmctld.log"
        if log.is_file():
            with log.open(encoding="utf-8", errors="replace") as lines:
                found[arm] = arm_log(lines, outcomes, compression)
    return found


def stability(lines: Iterable[str]) -> Stability:
    """Consecutive passes, per partition, with the same first planned job and no event between them."""
    passes, events, partition = read(lines)
    touched = [(at, partition.get(job), kind != "submit") for at, job, kind in events]
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
