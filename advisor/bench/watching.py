"""What a command shows of its measuring jobs (`bench submit`, `comm measure`): a progress display on
stderr while it waits on them (minutes to hours: without it the terminal says nothing), and how they ended,
as lines or as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from advisor.bench.measuring import Measured, Night, Watch


@contextmanager
def progress_on(console: Console, what: str, told: Callable[[Night], None]) -> Iterator[Watch]:
    """A `Watch` that tells ``told`` of the jobs Slurm took, then shows a bar of those ended with the time
    waited, for the time of the ``with``, where ``console`` is a terminal (nothing otherwise: a log or a
    pipe gets the lines alone); the bar clears itself at the end."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("ended"))
    progress = Progress(
        *columns, TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal
    )
    tasks: list[TaskID] = []

    def submitted(night: Night) -> None:
        told(night)
        if night.jobs:
            tasks.append(progress.add_task(f"waiting on {what}", total=len(night.jobs)))

    def polled(states: dict[int, str]) -> None:
        for task in tasks:
            progress.update(task, completed=len(states))

    with progress:
        yield Watch(submitted=submitted, polled=polled)


def said_submitted(console: Console, verb: str, quiet: bool) -> Callable[[Night], None]:
    """What tells, once Slurm has answered, each job it took and each partition it refused, with its
    words (``quiet``: nothing, for a command printing JSON at its end)."""

    def told(night: Night) -> None:
        if quiet:
            return
        for job in night.jobs:
            console.print(f"{job.partition}: job {job.job_id}", highlight=False, soft_wrap=True)
        for name, why in night.refused.items():
            console.print(
                f"{name}: not {verb}, Slurm refused the job: {why}", highlight=False, soft_wrap=True
            )

    return told


def said_measured(console: Console, measured: Measured, db: Path) -> None:
    """How each job ended, and the rows stored."""
    for job in measured.night.jobs:
        state = measured.states[job.job_id]
        shown = "cancelled at the window's end" if job.job_id in measured.cancelled else state
        console.print(f"{job.partition}: job {job.job_id}: {shown}", highlight=False, soft_wrap=True)
    console.print(f"{measured.stored} new rows in {db}", highlight=False, soft_wrap=True)


def measured_json(measured: Measured, db: Path) -> str:
    """The same for a program: each job with its partition, final state and whether the window's end
    cancelled it; the partitions Slurm refused, with its words; the rows stored."""
    jobs = [
        {
            "partition": job.partition,
            "job_id": job.job_id,
            "state": measured.states[job.job_id],
            "cancelled": job.job_id in measured.cancelled,
            "results": str(job.results),
        }
        for job in measured.night.jobs
    ]
    answer = {"jobs": jobs, "refused": measured.night.refused, "stored": measured.stored, "db": str(db)}
    return json.dumps(answer, indent=2)
