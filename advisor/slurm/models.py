"""Typed views of what Slurm reports, independent of the command or version that produced them.

All models are frozen so parsed cluster snapshots can be shared and cached without defensive copies.
Datetimes are timezone-aware UTC; a duration of ``None`` means unlimited or unset.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from advisor.frozen import Frozen

#: One ``scontrol show -o`` record: Slurm's own keys and raw values, for fields we do not model.
Record = dict[str, str]

_OUT_OF_SERVICE = {"DOWN", "FUTURE", "UNKNOWN", "DRAINED"}
_DRAINED = {"DRAIN", "DRAINED", "DRAINING", "NOT_RESPONDING", "MAINTENANCE"}


class Gpus(Frozen):
    """GPUs of one gres specification; ``type`` is None when untyped or when several types are mixed."""

    type: str | None
    count: int


class Node(Frozen):
    name: str
    state: str
    flags: list[str]
    partitions: list[str]
    cpus: int
    alloc_cpus: int
    memory_mb: int
    alloc_memory_mb: int
    gpus: Gpus | None
    gpus_used: int
    features: tuple[str, ...] = ()
    """The node's active features, which ``--constraint`` selects by."""

    @property
    def serves_jobs(self) -> bool:
        """Neither down (or not yet in service) nor drained or draining."""
        flags = {flag.upper() for flag in self.flags}
        return self.state.upper() not in _OUT_OF_SERVICE and not flags & _DRAINED


class Access(Frozen):
    """Who may submit to a partition (``scontrol show partition``); None is Slurm's ALL, or no deny list."""

    allow_accounts: list[str] | None = None
    deny_accounts: list[str] | None = None
    allow_groups: list[str] | None = None
    allow_qos: list[str] | None = None
    deny_qos: list[str] | None = None


class Association(Frozen):
    """One of a user's associations (``sacctmgr show assoc``): the account, on which partition (None: any),
    with which QOS."""

    account: str
    partition: str | None
    qos: list[str]
    default_qos: str | None


class Partition(Frozen):
    """A partition joined with its nodes; per-node figures are maxima, since nodes may differ."""

    name: str
    state: str
    is_default: bool
    node_names: list[str]
    total_cpus: int
    max_time: timedelta | None
    default_time: timedelta | None
    gpu_type: str | None
    gpus_per_node: int
    cpus_per_node: int
    memory_per_node_mb: int
    nodes: list[Node]
    access: Access = Access()

    @property
    def takes_jobs(self) -> bool:
        """Whether a job sent here can start without an admin: the partition is up and one of its nodes is
        neither down nor drained."""
        return self.state.upper() == "UP" and any(node.serves_jobs for node in self.nodes)


ENDED_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)
"""The states of a job that has ended, as squeue shows it for as long as slurmctld keeps it (MinJobAge)."""


class QueuedJob(Frozen):
    """A job as squeue sees it; ``start_time`` of a pending job is Slurm's estimate, when it has one."""

    job_id: int
    array_job_id: int | None
    array_task_id: int | None
    name: str
    user: str
    uid: int
    partition: str
    state: str
    reason: str
    submit_time: datetime
    start_time: datetime | None
    end_time: datetime | None
    time_limit: timedelta | None
    node_count: int
    cpus: int
    gpus: int
    gpu_type: str | None
    tres_requested: dict[str, str]
    node_list: str

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES


class FinishedJob(Frozen):
    """An ended job from accounting; ``alloc_tres`` counts are raw (``mem`` in MB)."""

    job_id: int
    array_job_id: int | None
    array_task_id: int | None
    name: str
    user: str
    partition: str
    state: str
    submit_time: datetime
    start_time: datetime | None
    end_time: datetime
    elapsed: timedelta
    time_limit: timedelta | None
    node_count: int
    alloc_tres: dict[str, str]
    gpus: int
    exit_code: int


class SubmitResult(Frozen):
    job_id: int
    cluster: str | None


class TestOnlyResult(Frozen):
    """Slurm's start estimate for a job that was not submitted; ``nodes`` is a hostlist expression."""

    __test__ = False  # not a pytest test class, despite the name

    job_id: int
    start_time: datetime
    processors: int
    nodes: str
    partition: str
