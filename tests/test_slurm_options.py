"""The one builder of the advisor's own sbatch options (`advisor/slurm/options.py`) and its three users."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from advisor.comm.cli import job_options as comm_options
from advisor.settings.validated import BenchSettings
from advisor.slurm.models import Partition
from advisor.slurm.options import JobResources, OwnJob, own_job_options, resource_options
from advisor.wait.estimate import sbatch_options
from advisor.wait.snapshot import SlotRequest

SITE = BenchSettings(account="ops", qos="bench", reservation="nightly", constraint="ib", memory="32G")


def test_resources_become_options_with_gpus_spelled_per_node_as_gres() -> None:
    two_nodes = JobResources(
        partition="a100", nodes=2, tasks_per_node=4, gpus_per_node=4, time_limit=timedelta(minutes=90)
    )
    assert resource_options(two_nodes) == [
        "--partition=a100",
        "--nodes=2",
        "--ntasks=8",
        "--ntasks-per-node=4",
        "--cpus-per-task=1",
        "--gres=gpu:4",
        "--time=01:30:00",
    ]
    assert resource_options(JobResources(partition="cpu")) == [
        "--partition=cpu",
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=1",
    ]


def test_the_advisors_own_job_runs_under_every_term_of_the_site() -> None:
    one_gpu = JobResources(partition="t4", cpus_per_task=8, gpus_per_node=1)
    job = OwnJob(name="advisor-bench", log=Path("/b/t4.log"), nice=100, singleton=True)
    assert own_job_options(one_gpu, SITE, job) == [
        "--partition=t4",
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=8",
        "--gres=gpu:1",
        "--mem=32G",
        "--job-name=advisor-bench",
        "--output=/b/t4.log",
        "--account=ops",
        "--qos=bench",
        "--reservation=nightly",
        "--constraint=ib",
        "--nice=100",
        "--dependency=singleton",
    ]
    stated = own_job_options(JobResources(partition="t4", memory="4G"), BenchSettings(), job)
    assert "--mem=4G" in stated and not any(word.startswith("--account") for word in stated)


def test_a_communication_job_asks_for_the_sites_memory_reservation_and_constraint_too() -> None:
    """Before the one builder, `advisor comm measure` dropped all three (only account and QOS)."""
    partition = Partition(
        name="a100",
        state="UP",
        is_default=False,
        node_names=["a100-1", "a100-2"],
        total_cpus=64,
        max_time=None,
        default_time=None,
        gpu_type="a100",
        gpus_per_node=4,
        cpus_per_node=32,
        memory_per_node_mb=256_000,
        nodes=[],
    )
    options = comm_options(partition, 2, 4, 20, Path("/b/a100.comm.log"), SITE)
    assert {"--mem=32G", "--reservation=nightly", "--constraint=ib", "--account=ops", "--qos=bench"} <= set(
        options
    )
    assert {"--nodes=2", "--ntasks=8", "--ntasks-per-node=4", "--gres=gpu:4", "--time=00:20:00"} <= set(
        options
    )


def test_a_wait_question_and_an_own_job_spell_gpus_the_same_way() -> None:
    asked = sbatch_options(SlotRequest(partitions=["t4"], gpus_per_node=1, cpus_per_node=8, time_limit=None))
    own = own_job_options(
        JobResources(partition="t4", cpus_per_task=8, gpus_per_node=1),
        BenchSettings(),
        OwnJob("x", Path("l")),
    )
    assert (
        [word for word in asked if "gpu" in word]
        == [word for word in own if "gpu" in word]
        == ["--gres=gpu:1"]
    )
