"""Partitions that really differ in speed: the kernel's CPU controller caps each slow node's slurmd and the
jobs it starts, and the benchmark's fingerprint records the cap. The cgroup files are read as the kernel
writes them (fixtures below), then the real sandbox measures one step on a fast and a slow partition."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from advisor.bench.results import read_jsonl
from advisor.bench.submit import BenchRequest, submit_benchmarks, wait_for_jobs
from advisor.cgroups import quota_cores
from advisor.records import Fingerprint, StepMeasurement
from advisor.sandbox.cluster import Sandbox
from advisor.sandbox.speed import SpeedControl
from advisor.settings.validated import BenchSettings


def test_a_v1_quota_is_read_as_cores_and_no_quota_as_none(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu"
    (cpu / "slow").mkdir(parents=True)
    (cpu / "slow" / "cpu.cfs_quota_us").write_text("80000\n")
    (cpu / "slow" / "cpu.cfs_period_us").write_text("100000\n")
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    mine = tmp_path / "cgroup"
    mine.write_text("12:memory:/\n4:cpu,cpuacct:/slow\n0::/\n")
    assert quota_cores(mine, v1=cpu, v2=tmp_path) == 0.8
    mine.write_text("4:cpu,cpuacct:/\n")
    assert quota_cores(mine, v1=cpu, v2=tmp_path) is None


def test_a_v2_quota_is_read_from_cpu_max(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "cpu.max").write_text("40000 100000\n")
    mine = tmp_path / "cgroup"
    mine.write_text("0::/job\n")
    assert quota_cores(mine, v1=tmp_path / "absent", v2=tmp_path) == 0.4
    (tmp_path / "job" / "cpu.max").write_text("max 100000\n")
    assert quota_cores(mine, v1=tmp_path / "absent", v2=tmp_path) is None


def test_without_a_writable_controller_the_sandbox_says_why(tmp_path: Path) -> None:
    control = SpeedControl.detect(v1=tmp_path / "none", v2=tmp_path)
    assert control.root is None and control.missing is not None and "no CPU controller" in control.missing
    assert control.group(tmp_path, "t4-1", 0.8) is None


def test_a_capped_fingerprint_is_another_machine_and_an_uncapped_one_keeps_its_identity() -> None:
    fast = Fingerprint(
        partition="a100",
        node="a100-1",
        device="cpu",
        gpu_name=None,
        gpu_count=0,
        gpu_memory_mb=None,
        driver=None,
        cuda=None,
        cudnn=None,
        cpu_model="x86",
        cpu_cores=2,
        torch="2.14.1",
    )
    slow = fast.model_copy(update={"partition": "t4", "node": "t4-1", "cpu_quota": 0.8})
    assert fast.machine() != slow.machine()
    assert "cpu_quota" not in fast.model_dump() and slow.model_dump()["cpu_quota"] == 0.8
    assert Fingerprint.model_validate(fast.model_dump()).key() == fast.key()


def test_the_same_step_runs_slower_on_the_slower_partition(sandbox: Sandbox, tmp_path: Path) -> None:
    """a100 nodes run at 1.0, t4 nodes at 0.4 of two cores. The quota is enforced per 100 ms period, so a
    step of a few milliseconds can fall between throttles; a step of tens of them (batch 16) cannot. (How
    far from 2.5 it lands, and why, is in benchmarks/README.md.)"""
    assert sandbox.status().notes == [], "the sandbox could not slow its nodes here"
    partitions = [p for p in sandbox.client.partitions() if p.name in {"a100", "t4"}]
    request = BenchRequest(
        python=sys.executable,
        results_dir=tmp_path / "results",
        budget=timedelta(minutes=4),
        quick=True,
        one_at_a_time=True,
        extra=("--plan-limit", "2"),  # squeezenet1_1 at batch 1 and 16
        site=BenchSettings(cpu_only=True),
    )
    night = submit_benchmarks(sandbox.client, partitions, request, datetime.now(UTC))
    states = wait_for_jobs(sandbox.client, night.jobs, timeout=timedelta(minutes=10), poll_s=1.0)
    assert set(states.values()) == {"COMPLETED"}, states
    steps: dict[str, dict[str, float]] = {}
    fingerprints = {}
    for job in night.jobs:
        for line in read_jsonl(job.results):
            fingerprints[job.partition] = line.fingerprint
            if isinstance(line.measurement, StepMeasurement) and line.measurement.median_s:
                config = line.measurement.config
                steps.setdefault(f"{config.model} {config.batch}", {})[job.partition] = (
                    line.measurement.median_s
                )
    assert fingerprints["t4"].cpu_quota == 0.8 and fingerprints["a100"].cpu_quota is None
    assert fingerprints["t4"].machine() != fingerprints["a100"].machine()
    heavy = steps.get("squeezenet1_1 16", {})
    assert set(heavy) == {"a100", "t4"}, steps
    assert heavy["t4"] / heavy["a100"] > 1.8, steps
