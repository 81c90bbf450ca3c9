"""Where a job may run at all: partitions' access lists, the caller's associations, and nodes against the
job as written. The partitions are the sandbox's own, from its recorded `scontrol` and `sinfo` output."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.jobscript.request import JobRequest, build_request
from advisor.recommend.placement import Standing, refusal
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import Association, Partition
from advisor.slurm.parse import parse_associations
from advisor.slurm.testing import RecordedRunner
from advisor.slurm.values import expand_hostlist

RECORDING = Path(__file__).parent / "data" / "slurm" / "sandbox-22.05.recording.json"
ROOT = Standing(groups=frozenset({"root"}), account=None)


@pytest.fixture(scope="module")
def partitions() -> dict[str, Partition]:
    return {p.name: p for p in SlurmClient(RecordedRunner.load(RECORDING)).partitions()}


def request(*options: str) -> JobRequest:
    script = "#!/bin/sh\n" + "".join(f"#SBATCH {option}\n" for option in options) + "python train.py\n"
    return build_request(script, ["train.sbatch"], {}, "train.sbatch")


def restricted(partition: Partition, **access: list[str]) -> Partition:
    return partition.model_copy(update={"access": partition.access.model_copy(update=access)})


def test_the_recorded_partitions_let_everyone_in(partitions: dict[str, Partition]) -> None:
    """AllowAccounts=ALL and friends read as no list; the sandbox's nodes have no features."""
    a100 = partitions["a100"]
    assert a100.access.allow_accounts is None and a100.access.allow_groups is None
    assert a100.access.deny_qos is None and a100.nodes[0].features == ()
    assert refusal(a100, request("-p t4", "--gres=gpu:1"), ROOT, "t4") is None


def test_a_partition_closed_to_the_callers_account_group_or_qos_is_refused_with_the_list_named(
    partitions: dict[str, Partition],
) -> None:
    a100, job = partitions["a100"], request("-p t4", "--gres=gpu:1", "--qos=long")
    physics = Standing(groups=frozenset({"physics"}), account="physics")
    assert "AllowAccounts" in str(refusal(restricted(a100, allow_accounts=["chem"]), job, physics, "t4"))
    assert "DenyAccounts" in str(refusal(restricted(a100, deny_accounts=["physics"]), job, physics, "t4"))
    assert "AllowGroups" in str(refusal(restricted(a100, allow_groups=["chem"]), job, physics, "t4"))
    assert refusal(restricted(a100, allow_groups=["chem", "physics"]), job, physics, "t4") is None
    assert "QOS long" in str(refusal(restricted(a100, allow_qos=["normal"]), job, physics, "t4"))
    assert "DenyQos" in str(refusal(restricted(a100, deny_qos=["long"]), job, physics, "t4"))


def test_the_callers_associations_decide_where_the_account_may_run(partitions: dict[str, Partition]) -> None:
    associations = tuple(
        parse_associations("physics|v100|normal,long|normal\nphysics|t4|normal|normal\nchem||normal|\n")
    )
    assert associations[2] == Association(account="chem", partition=None, qos=["normal"], default_qos=None)
    physics = Standing(groups=frozenset(), account="physics", associations=associations)
    job = request("-p t4", "--gres=gpu:1")
    assert "no association with account physics" in str(refusal(partitions["a100"], job, physics, "t4"))
    assert refusal(partitions["v100"], job, physics, "t4") is None
    long = request("-p t4", "--gres=gpu:1", "--qos=long")
    assert refusal(partitions["v100"], long, physics, "t4") is None
    assert "not one of your association's" in str(refusal(partitions["t4"], long, physics, "t4"))
    chem = Standing(groups=frozenset(), account="chem", associations=associations)
    assert refusal(partitions["a100"], job, chem, "t4") is None, "an association with no partition: any"


def test_nodes_must_hold_the_jobs_cpus_and_memory_as_written(partitions: dict[str, Partition]) -> None:
    """a100 nodes: 32 CPUs, 250 GB; v100: 16 and 125 GB; t4: 8 and 62.5 GB."""
    big = request("-p t4", "--gres=gpu:1", "--mem=200G")
    assert refusal(partitions["a100"], big, ROOT, "t4") is None
    assert "204800 MB of memory" in str(refusal(partitions["v100"], big, ROOT, "t4"))
    wide = request("-p t4", "--gres=gpu:1", "--ntasks=2", "--cpus-per-task=12")
    assert refusal(partitions["a100"], wide, ROOT, "t4") is None
    assert "no node in service there has 24 CPUs" in str(refusal(partitions["v100"], wide, ROOT, "t4"))
    per_cpu = request("-p t4", "--gres=gpu:1", "--cpus-per-task=4", "--mem-per-cpu=20G")
    assert refusal(partitions["v100"], per_cpu, ROOT, "t4") is None
    assert refusal(partitions["t4"], per_cpu, ROOT, "t4") is not None, "80 GB on 62.5 GB nodes"


def test_nodelist_exclude_constraint_and_reservation_are_honoured(partitions: dict[str, Partition]) -> None:
    a100 = partitions["a100"]
    named = request("-p t4", "--gres=gpu:1", "--nodelist=t4-1")
    assert "lacks the nodes the job names: t4-1" in str(refusal(a100, named, ROOT, "t4"))
    assert refusal(partitions["t4"], named, ROOT, "t4") is None
    excluded = request("-p t4", "--gres=gpu:1", "--exclude=a100-[1-2]")
    assert "not excluded" in str(refusal(a100, excluded, ROOT, "t4"))
    assert refusal(a100, request("-p t4", "--exclude=a100-1"), ROOT, "t4") is None
    infiniband = request("-p t4", "--gres=gpu:1", "--constraint=ib&nvlink")
    assert "features ib&nvlink" in str(refusal(a100, infiniband, ROOT, "t4"))
    featured = a100.model_copy(
        update={"nodes": [a100.nodes[0].model_copy(update={"features": ("ib", "nvlink")}), a100.nodes[1]]}
    )
    assert refusal(featured, infiniband, ROOT, "t4") is None
    assert refusal(featured, request("-p t4", "--constraint=ib|opa"), ROOT, "t4") is None
    counted = request("-p t4", "--gres=gpu:1", "--constraint=[ib*2&nvlink]")
    assert "Slurm's alone to read" in str(refusal(featured, counted, ROOT, "t4"))
    assert refusal(partitions["t4"], counted, ROOT, "t4") is None, "its own partition: Slurm decides"
    reserved = request("-p t4", "--gres=gpu:1", "--reservation=maintenance")
    assert "reservation maintenance" in str(refusal(a100, reserved, ROOT, "t4"))
    assert refusal(partitions["t4"], reserved, ROOT, "t4") is None


def test_hostlists_expand_as_slurm_writes_them() -> None:
    assert expand_hostlist("a100-[1-2],t4-1") == ["a100-1", "a100-2", "t4-1"]
    assert expand_hostlist("n[08-10,3]-ib") == ["n08-ib", "n09-ib", "n10-ib", "n3-ib"]
    assert expand_hostlist("") == []
    with pytest.raises(ValueError, match="not a hostlist range"):
        expand_hostlist("n[a-b]")
