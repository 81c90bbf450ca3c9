"""Turning Slurm's view of the queue into a snapshot, and candidates into sbatch options (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from advisor.slurm.models import Gpus, Node, Partition, QueuedJob
from advisor.slurm.values import expand_hostlist
from advisor.wait.accuracy import WaitEstimate
from advisor.wait.collect import build_snapshot
from advisor.wait.estimate import QueueReading, estimate_waits, sbatch_options
from advisor.wait.snapshot import Allocation, QueueSnapshot, SlotRequest

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)


def node(name: str, gpus: int = 4, state: str = "IDLE", flags: tuple[str, ...] = ()) -> Node:
    return Node(
        name=name,
        state=state,
        flags=list(flags),
        partitions=[name.split("-")[0]],
        cpus=32,
        alloc_cpus=0,
        memory_mb=256000,
        alloc_memory_mb=0,
        gpus=Gpus(type="a100", count=gpus) if gpus else None,
        gpus_used=0,
    )


def partition(name: str, nodes: list[Node]) -> Partition:
    return Partition(
        name=name,
        state="UP",
        is_default=False,
        node_names=[n.name for n in nodes],
        total_cpus=32 * len(nodes),
        max_time=timedelta(days=2),
        default_time=None,
        gpu_type="a100",
        gpus_per_node=4,
        cpus_per_node=32,
        memory_per_node_mb=256000,
        nodes=nodes,
    )


def job(job_id: int, state: str, **fields: object) -> QueuedJob:
    values: dict[str, object] = {
        "job_id": job_id,
        "array_job_id": None,
        "array_task_id": None,
        "name": "train",
        "user": "alice",
        "uid": 1000,
        "partition": "a100",
        "state": state,
        "reason": "None" if state == "RUNNING" else "Priority",
        "submit_time": NOW - timedelta(hours=1),
        "start_time": NOW - timedelta(minutes=30) if state == "RUNNING" else None,
        "end_time": None,
        "time_limit": timedelta(hours=2),
        "node_count": 1,
        "cpus": 8,
        "gpus": 2,
        "gpu_type": "a100",
        "tres_requested": {"cpu": "8", "mem": "16G", "node": "1", "gres/gpu": "2"},
        "node_list": "a100-1" if state == "RUNNING" else "",
    }
    values.update(fields)
    return QueuedJob.model_validate(values)


def test_hostlists_expand_ranges_lists_and_zero_padding() -> None:
    assert expand_hostlist("t4-[1-2],a100-1") == ["t4-1", "t4-2", "a100-1"]
    assert expand_hostlist("gpu[008-010,12]") == ["gpu008", "gpu009", "gpu010", "gpu12"]
    assert expand_hostlist("r[1-2]-n[1-2]") == ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]
    assert expand_hostlist("") == []
    with pytest.raises(ValueError, match="hostlist"):
        expand_hostlist("n[a-b]")


def test_the_one_hostlist_parser_takes_both_parsers_rules() -> None:
    """Spaces (the placement check's parser) and several brackets per name (the snapshot's) together."""
    assert expand_hostlist("t4-1, r[1-2]-n[08-09]-ib") == [
        "t4-1",
        "r1-n08-ib",
        "r1-n09-ib",
        "r2-n08-ib",
        "r2-n09-ib",
    ]


def test_a_snapshot_splits_running_jobs_over_their_nodes_and_orders_pending_jobs_by_submission() -> None:
    nodes = [node("a100-1"), node("a100-2"), node("a100-3", flags=("DRAIN",)), node("a100-4", state="DOWN")]
    jobs = [
        job(1, "RUNNING", node_count=2, cpus=9, gpus=4, node_list="a100-[1-2]", tres_requested={"mem": "1G"}),
        job(2, "PENDING", submit_time=NOW - timedelta(minutes=5), node_count=2, gpus=8, cpus=16),
        job(3, "PENDING", submit_time=NOW - timedelta(minutes=50), partition="a100,v100", time_limit=None),
        job(4, "PENDING", reason="JobHeldUser"),
        job(5, "PENDING", reason="Dependency"),
        job(6, "PENDING", partition="v100"),  # not a partition here
        job(7, "COMPLETED"),
    ]
    state = build_snapshot([partition("a100", nodes)], jobs, NOW)
    assert state.taken_at == NOW
    assert state.partitions == {"a100": ["a100-1", "a100-2", "a100-3", "a100-4"]}
    assert [(n.name, n.usable) for n in state.nodes] == [
        ("a100-1", True),
        ("a100-2", True),
        ("a100-3", False),
        ("a100-4", False),
    ]
    assert (state.nodes[0].gpus, state.nodes[0].cpus, state.nodes[0].memory_mb) == (4, 32, 256000)
    (running,) = state.running
    assert running.allocations == [
        Allocation(node="a100-1", gpus=2, cpus=5, memory_mb=512),
        Allocation(node="a100-2", gpus=2, cpus=4, memory_mb=512),
    ]
    assert running.limit_end == NOW + timedelta(minutes=90)
    assert [p.job_id for p in state.pending] == [3, 2]
    first, second = (p.request for p in state.pending)
    assert first == SlotRequest(
        partitions=["a100"],
        nodes=1,
        gpus_per_node=2,
        cpus_per_node=8,
        memory_mb_per_node=16384,
        time_limit=None,
    )
    assert (second.nodes, second.gpus_per_node, second.cpus_per_node, second.memory_mb_per_node) == (
        2,
        4,
        8,
        8192,
    )


def test_a_candidate_becomes_sbatch_options_for_one_task_per_node() -> None:
    request = SlotRequest(
        partitions=["t4"],
        nodes=2,
        gpus_per_node=2,
        cpus_per_node=4,
        memory_mb_per_node=100,
        time_limit=timedelta(hours=1),
    )
    assert sbatch_options(request) == [
        "--partition=t4",
        "--nodes=2",
        "--ntasks=2",
        "--cpus-per-task=4",
        "--gres=gpu:2",
        "--mem=100",
        "--time=01:00:00",
    ]
    assert sbatch_options(SlotRequest(partitions=["cpu"], time_limit=None)) == [
        "--partition=cpu",
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=1",
    ]


def test_a_wait_is_estimated_in_one_partition() -> None:
    empty = QueueSnapshot(taken_at=NOW, nodes=[], partitions={}, running=[], pending=[])
    queue = QueueReading(empty, lambda candidate: (None, "not asked"))
    both = SlotRequest(partitions=["t4", "v100"], time_limit=None)
    with pytest.raises(ValueError, match="exactly one partition"):
        estimate_waits([both], NOW, {}, [], queue)


def test_the_preferred_sources_wait_is_shown_first_and_the_other_fills_in() -> None:
    estimate = WaitEstimate(slurm_wait_s=600, advisor_wait_s=240, preferred="advisor")
    assert estimate.wait_s == 240
    assert estimate.model_copy(update={"preferred": "slurm"}).wait_s == 600
    assert estimate.model_copy(update={"advisor_wait_s": None}).wait_s == 600
