"""Partitions that really differ in speed: the kernel's CPU controller caps each slow node's slurmd and the
jobs it starts, and the benchmark's fingerprint records the cap. The cgroup files are read as the kernel
writes them (fixtures below). How much slower the sandbox's slow partitions measure is
`benchmarks/sandbox_speed.py`'s figure, not a test's: it varies too much from run to run to assert."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.cgroups import quota_cores
from advisor.records import Fingerprint
from advisor.sandbox.speed import SpeedControl, join, remove


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


@pytest.mark.skipif(os.geteuid() != 0, reason="the kernel's CPU controller is root's to write")
def test_a_process_started_into_a_speed_group_runs_under_its_quota(tmp_path: Path) -> None:
    """The real controller: the group is made, a child joins it before it runs, and reads its own cap."""
    control = SpeedControl.detect()
    group = control.group(tmp_path, "t4-1", 0.8)
    assert group is not None, control.missing
    try:
        probe = "from advisor.cgroups import quota_cores; print(quota_cores())"
        child = subprocess.run(
            [sys.executable, "-c", probe],
            preexec_fn=lambda: join(group),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert child.stdout.strip() == "0.8"
        assert quota_cores() != 0.8, "the caller itself stays outside"
    finally:
        remove(group)
    assert not group.exists()
