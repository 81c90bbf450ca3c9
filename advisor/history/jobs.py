"""One job as its history knows it, from Slurm's accounting or from a Standard Workload Format log.

Each becomes a `PastJob` (`advisor.history.past`, the plain types the pure core reads); this module is the
edge that reads the files and accounting's rows.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Iterator
from pathlib import Path

from advisor.history.past import JobAsk, PastJob, past_job
from advisor.slurm.models import FinishedJob

TIMEOUT_STATES = frozenset({"TIMEOUT", "DEADLINE"})


class TraceError(ValueError):
    """A trace line that cannot be read: ``FILE:LINE: what is wrong``."""


def from_accounting(jobs: Iterable[FinishedJob]) -> list[PastJob]:
    """Accounting's ended jobs that ran, in submission order; one never started says nothing of a run."""
    found: list[PastJob] = []
    for job in jobs:
        if job.start_time is None:
            continue
        limit = job.time_limit.total_seconds() if job.time_limit else None
        cpus = int(job.alloc_tres.get("cpu", "0") or 0)
        ask = JobAsk(
            user=job.user,
            script=job.name,
            partition=job.partition,
            submit_s=job.submit_time.timestamp(),
            limit_s=limit,
            cpus=cpus,
            gpus=job.gpus,
            nodes=max(job.node_count, 1),
        )
        run = job.elapsed.total_seconds()
        found.append(
            past_job(
                ask, run, job.end_time.timestamp(), job.state == "COMPLETED", job.state in TIMEOUT_STATES
            )
        )
    return sorted(found, key=lambda past: past.ask.submit_s)


def read_swf(path: Path) -> list[PastJob]:
    """A Parallel Workloads Archive log (``.swf`` or ``.swf.gz``): jobs that ran, in submission order.

    Fields (1-based): 2 submit, 3 wait, 4 run, 5 allocated processors, 8 requested processors, 9 requested
    time, 11 status (1 completed, 0 failed, 5 cancelled), 12 user, 14 executable, 16 partition; -1 unknown.
    """
    return sorted(_swf_jobs(path), key=lambda past: past.ask.submit_s)


def _swf_jobs(path: Path) -> Iterator[PastJob]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="ascii", errors="replace") as lines:
            for number, line in enumerate(lines, start=1):
                if line.startswith(";") or not line.strip():
                    continue
                past = _swf_line(line, f"{path}:{number}")
                if past is not None:
                    yield past
    except (OSError, EOFError) as exc:
        raise TraceError(f"{path}: cannot read: {exc}") from None


def _swf_line(line: str, place: str) -> PastJob | None:
    fields = line.split()
    if len(fields) < 16:
        raise TraceError(f"{place}: {len(fields)} fields, SWF has 18")
    try:
        submit, wait, run = (float(value) for value in fields[1:4])
        cpus = int(float(fields[4])) if float(fields[4]) > 0 else int(float(fields[7]))
        limit, status = float(fields[8]), int(fields[10])
    except ValueError:
        raise TraceError(f"{place}: a field is not a number") from None
    if run < 0 or wait < 0:
        return None  # never ran
    executable = fields[13]
    ask = JobAsk(
        user=fields[11],
        script="" if executable == "-1" else executable,
        partition="" if fields[15] == "-1" else fields[15],
        submit_s=submit,
        limit_s=limit if limit > 0 else None,
        cpus=max(cpus, 1),
    )
    return past_job(ask, run, submit + wait + run, status == 1, timed_out=False)
