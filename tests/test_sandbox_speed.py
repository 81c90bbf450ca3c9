"""Partitions that really differ in speed: the kernel's CPU controller caps each slow node's slurmd and the
jobs it starts, and the benchmark's fingerprint records the cap. The cgroup files are read as the kernel
writes them (fixtures below). How much slower the sandbox's slow partitions measure is
`benchmarks/sandbox_speed.py`'s figure, not a test's: it varies too much from run to run to assert."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.cgroups import quota_cores
from advisor.records import Fingerprint
from advisor.sandbox.cluster import Sandbox, SandboxRecord
from advisor.sandbox.speed import SpeedControl, join, node_quota, remove

from .conftest import sandbox_spec


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


def test_a_node_quota_is_its_speed_times_the_cpus_it_may_really_use() -> None:
    assert node_quota("t4-1", 0.4, 8, allowed_cpus=16, ceiling=None).cores == 0.4 * 8
    assert node_quota("t4-1", 0.4, 8, allowed_cpus=1, ceiling=None).cores == 0.4, "the affinity mask"
    assert node_quota("t4-1", 0.4, 8, allowed_cpus=16, ceiling=1.5).cores == 0.4 * 1.5, "the quota above"
    assert node_quota("v100-1", 0.7, 1, allowed_cpus=2, ceiling=None).cores == 0.7, "its own CPUs"
    assert node_quota("t4-1", 0.4, 8, allowed_cpus=1, ceiling=None).problem is None


def test_a_quota_below_the_kernels_least_says_the_speed_it_gives_instead() -> None:
    quota = node_quota("t4-1", 0.001, 8, allowed_cpus=2, ceiling=None)
    assert quota.cores == 0.01, "1 ms of each 100 ms period"
    assert quota.problem == (
        "node t4-1 runs at 0.5% of its 2 usable CPUs, not 0.1%: the kernel's least quota is 0.01 CPUs"
    )


@contextlib.contextmanager
def one_core() -> Iterator[int]:
    """This process (and what it starts) on one core, as a pinned test worker runs the sandbox."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        yield 1
    finally:
        os.sched_setaffinity(0, before)


def test_under_a_narrow_affinity_a_slow_node_keeps_its_share_of_the_cores_it_can_use(tmp_path: Path) -> None:
    """The quota is written as the kernel's v2 file: 0.4 of one core is 40 ms a 100 ms period, where the
    machine's core count (`os.cpu_count()`) gave a quota the one core never reaches: full speed."""
    sandbox = Sandbox(sandbox_spec(), tmp_path / "sandbox")
    sandbox.speed_control = SpeedControl(tmp_path / "cgroup", version=2)
    (tmp_path / "cgroup").mkdir()
    record = SandboxRecord()
    with one_core() as cores:
        group = sandbox._speed_group("t4-1", record)
    assert group is not None and record.notes == []
    ceiling = min(cores, quota_cores() or cores)
    assert (group / "cpu.max").read_text() == f"{round(0.4 * ceiling * 100_000)} 100000"


def test_a_quota_the_kernel_refuses_is_a_note_and_the_node_runs_at_full_speed(tmp_path: Path) -> None:
    sandbox = Sandbox(sandbox_spec(), tmp_path / "sandbox")
    sandbox.speed_control = SpeedControl(tmp_path / "absent", version=1)
    record = SandboxRecord()
    assert sandbox._speed_group("v100-2", record) is None
    (note,) = record.notes
    assert note.startswith("node v100-2 runs at full speed: its CPU quota was refused ([Errno 2]")
    sandbox.layout.record.parent.mkdir(parents=True)
    sandbox.layout.record.write_text(record.model_dump_json())
    assert sandbox.status().notes == [note], "`advisor sandbox status` shows it"


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
