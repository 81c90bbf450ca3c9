"""What the queue looks like at one instant, reduced to what a start-time simulation needs.

Nodes are listed once and partitions name them, because Slurm lets partitions share nodes. Running jobs
hold resources per node; pending jobs carry only their request, in priority order (highest first).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import Field

from advisor.frozen import Frozen


class SnapshotNode(Frozen):
    """A node's capacity; ``usable`` is False when it takes no new jobs (down, drained, draining)."""

    name: str
    gpus: int = Field(ge=0)
    cpus: int = Field(ge=0)
    memory_mb: int = Field(ge=0)
    usable: bool = True


class Allocation(Frozen):
    """What one job holds on one node."""

    node: str
    gpus: int = Field(ge=0)
    cpus: int = Field(ge=0)
    memory_mb: int = Field(ge=0)


class SlotRequest(Frozen):
    """A job's ask, per node as the scheduler places it; ``time_limit`` None is unlimited.

    ``memory_mb_per_node`` 0 leaves memory out of the simulation (and to Slurm's default in sbatch).
    """

    partitions: list[str] = Field(min_length=1)
    nodes: int = Field(default=1, ge=1)
    gpus_per_node: int = Field(default=0, ge=0)
    cpus_per_node: int = Field(default=1, ge=1)
    memory_mb_per_node: int = Field(default=0, ge=0)
    time_limit: timedelta | None


class RunningJob(Frozen):
    job_id: int
    user: str
    partition: str
    start_time: datetime
    time_limit: timedelta | None
    allocations: list[Allocation]

    @property
    def limit_end(self) -> datetime | None:
        """When Slurm must assume the job ends, the time its backfill planning uses."""
        return None if self.time_limit is None else self.start_time + self.time_limit


class PendingJob(Frozen):
    job_id: int
    user: str
    request: SlotRequest


class QueueSnapshot(Frozen):
    taken_at: datetime
    nodes: list[SnapshotNode]
    #: partition name -> the names of its nodes
    partitions: dict[str, list[str]]
    running: list[RunningJob]
    #: highest priority first
    pending: list[PendingJob]
