"""What Slurm says of the viewer's advised jobs: each one's name and state, and an array's tasks by state.

The daemon's store knows a job as ended only once accounting shows it, and an array's tasks never do under
the array's own id; the page (run as the viewer) asks squeue and sacct as the viewer instead. `job_states`
is pure; `slurm_lookup` is the edge that asks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime

from pydantic import Field

from advisor.frozen import Frozen
from advisor.predict.array_outcome import ended_state
from advisor.settings.validated import SlurmSettings
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import FinishedJob, QueuedJob
from advisor.slurm.runner import LocalRunner


class JobStates(Frozen):
    name: str | None
    state: str | None
    """A job's Slurm state; an array's: RUNNING while a task runs, PENDING while tasks only wait, else the
    state its tasks all ended in, or ENDED. None where Slurm no longer (or not yet) knows the job."""
    tasks: dict[str, int] = Field(default_factory=dict)
    """An array's tasks that have their own record, by state; empty for a single job."""
    more_pending: bool = False
    """An array's tasks still waiting as one record, not counted in ``tasks``."""


StatesLookup = Callable[[Sequence[int], datetime], dict[int, JobStates]]
"""Each job id's states (those submitted since the datetime); raises `SlurmError` when Slurm does not
answer."""


def job_states(
    ids: Sequence[int], queued: Sequence[QueuedJob], ended: Sequence[FinishedJob]
) -> dict[int, JobStates]:
    """``queued``: squeue's jobs (pending, running, just ended); ``ended``: accounting's. A task in both is
    taken from squeue, which is newer."""
    found: dict[int, JobStates] = {}
    for job_id in ids:
        live = [job for job in queued if job_id in (job.job_id, job.array_job_id)]
        past = [job for job in ended if job_id in (job.job_id, job.array_job_id)]
        seen: list[QueuedJob | FinishedJob] = [*live, *past]
        if any(job.array_job_id == job_id for job in seen):
            found[job_id] = _array(live, past, seen[0].name)
        elif seen:
            found[job_id] = JobStates(name=seen[0].name, state=seen[0].state)
    return found


def _array(live: list[QueuedJob], past: list[FinishedJob], name: str) -> JobStates:
    tasks: dict[int, str] = {job.array_task_id: job.state for job in past if job.array_task_id is not None}
    tasks |= {job.array_task_id: job.state for job in live if job.array_task_id is not None}
    waiting = any(job.array_task_id is None and not job.ended for job in live)
    counted = Counter(tasks.values())
    state: str | None
    if "RUNNING" in counted:
        state = "RUNNING"
    elif waiting or "PENDING" in counted:
        state = "PENDING"
    elif counted:
        state = ended_state(counted)
    else:
        state = None
    return JobStates(name=name, state=state, tasks=dict(sorted(counted.items())), more_pending=waiting)


def slurm_lookup(client: SlurmClient, user: str) -> StatesLookup:
    """Asked as the viewer, whose own jobs these are: squeue once, sacct for the ids alone."""

    def lookup(ids: Sequence[int], since: datetime) -> dict[int, JobStates]:
        if not ids:
            return {}
        return job_states(ids, client.jobs(user=user), client.history(since, job_ids=ids, users=[user]))

    return lookup


def viewers_slurm(slurm: SlurmSettings, user: str) -> StatesLookup:
    """This host's own Slurm commands, as the user who serves the page: the settings' SSH login (if any) is
    the daemon's, with a key only its user reads."""
    return slurm_lookup(SlurmClient(LocalRunner(slurm.env), timeout_s=slurm.timeout_s), user)
