"""Reads the queue from Slurm into a ``QueueSnapshot``; the conversion itself is pure and tested apart."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from advisor.slurm.client import SlurmClient
from advisor.slurm.models import Node, Partition, QueuedJob
from advisor.slurm.values import expand_hostlist, parse_memory_mb
from advisor.wait.snapshot import (
    Allocation,
    PendingJob,
    QueueSnapshot,
    RunningJob,
    SlotRequest,
    SnapshotNode,
)

_RUNNING = frozenset({"RUNNING", "COMPLETING", "CONFIGURING"})
_SERVING = frozenset({"IDLE", "MIXED", "ALLOCATED", "COMPLETING"})
_NOT_SERVING_FLAGS = frozenset({"DRAIN", "FAIL", "MAINTENANCE", "NOT_RESPONDING", "POWERED_DOWN"})
# Pending jobs that wait for something other than resources; the simulation cannot say when they start.
_NOT_WAITING_FOR_RESOURCES = frozenset(
    {
        "JobHeldUser",
        "JobHeldAdmin",
        "Dependency",
        "DependencyNeverSatisfied",
        "BeginTime",
        "PartitionDown",
        "PartitionInactive",
        "PartitionTimeLimit",
        "PartitionNodeLimit",
        "InvalidAccount",
        "InvalidQOS",
    }
)


def take_snapshot(client: SlurmClient, now: datetime) -> QueueSnapshot:
    return build_snapshot(client.partitions(), client.jobs(), now)


def build_snapshot(
    partitions: Sequence[Partition], jobs: Sequence[QueuedJob], now: datetime
) -> QueueSnapshot:
    """Join partitions and squeue's jobs.

    A job's resources are split evenly over its nodes (squeue's totals carry no per-node detail), and
    pending jobs are ordered by submission, which is Slurm's priority under priority/basic.
    """
    nodes = {node.name: _snapshot_node(node) for partition in partitions for node in partition.nodes}
    members = {partition.name: list(partition.node_names) for partition in partitions}
    running = [_running(job, now, nodes) for job in jobs if job.state in _RUNNING]
    waiting = sorted(
        (job for job in jobs if job.state == "PENDING" and job.reason not in _NOT_WAITING_FOR_RESOURCES),
        key=lambda job: (job.submit_time, job.job_id),
    )
    pending = [
        PendingJob(job_id=job.job_id, user=job.user, request=_request(job, partitions))
        for job in waiting
        if any(name in members for name in job.partition.split(","))
    ]
    return QueueSnapshot(
        taken_at=now, nodes=list(nodes.values()), partitions=members, running=running, pending=pending
    )


def _snapshot_node(node: Node) -> SnapshotNode:
    usable = node.state in _SERVING and not _NOT_SERVING_FLAGS.intersection(node.flags)
    return SnapshotNode(
        name=node.name,
        gpus=node.gpus.count if node.gpus else 0,
        cpus=node.cpus,
        memory_mb=node.memory_mb,
        usable=usable,
    )


def _memory_mb(job: QueuedJob) -> int:
    return parse_memory_mb(job.tres_requested["mem"]) if "mem" in job.tres_requested else 0


def _running(job: QueuedJob, now: datetime, nodes: dict[str, SnapshotNode]) -> RunningJob:
    hosts = [name for name in expand_hostlist(job.node_list) if name in nodes]
    shares = [_split(total, len(hosts)) for total in (job.gpus, job.cpus, _memory_mb(job))]
    allocations = [
        Allocation(node=name, gpus=gpus, cpus=cpus, memory_mb=memory)
        for name, gpus, cpus, memory in zip(hosts, *shares, strict=True)
    ]
    return RunningJob(
        job_id=job.job_id,
        user=job.user,
        partition=job.partition,
        start_time=job.start_time or now,
        time_limit=job.time_limit,
        allocations=allocations,
    )


def _split(total: int, parts: int) -> list[int]:
    """``total`` over ``parts`` as evenly as integers allow."""
    share, extra = divmod(total, parts) if parts else (0, 0)
    return [share + (1 if index < extra else 0) for index in range(parts)]


def _request(job: QueuedJob, partitions: Sequence[Partition]) -> SlotRequest:
    known = {partition.name for partition in partitions}
    count = max(job.node_count, 1)
    return SlotRequest(
        partitions=[name for name in job.partition.split(",") if name in known],
        nodes=count,
        gpus_per_node=math.ceil(job.gpus / count),
        cpus_per_node=max(1, math.ceil(job.cpus / count)),
        memory_mb_per_node=math.ceil(_memory_mb(job) / count),
        time_limit=job.time_limit,
    )
