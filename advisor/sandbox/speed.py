"""Partitions that really differ in speed on one machine: each slow node's slurmd (and so every job step
it starts, which inherits its cgroup under ``proctrack/linuxproc``) runs in a CPU cgroup capped at its share
of the cores its jobs may use.

The kernel's CPU controller does the capping: cgroup v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``
or v2's ``cpu.max``. Where neither can be written (not root, no controller mounted), nodes run at full
speed and `SpeedControl.missing` says why; a quota that cannot mean the declared speed says so too
(`node_quota`).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

from advisor.cgroups import V1, V2, quota_cores

PERIOD_US = 100_000
LEAST_QUOTA_US = 1000
"""The smallest quota the kernel takes (cgroup v1 refuses less than 1 ms a period)."""


@dataclass(frozen=True)
class NodeQuota:
    """A slow node's CPU quota, and why it does not give the node its declared speed (None when it does)."""

    cores: float
    problem: str | None = None


def node_quota(
    node: str, speed: float, cpus_per_node: int, allowed_cpus: int, ceiling: float | None
) -> NodeQuota:
    """``speed`` times the CPUs the node's jobs can really use: its declared CPUs, but no more than the
    sandbox's affinity mask allows (``allowed_cpus``; slurmd and its jobs inherit it) nor the quota already
    capping the sandbox (``ceiling``). A quota of the machine's cores under a narrower mask never bites,
    and the declared speeds would silently vanish."""
    usable = min(float(cpus_per_node), float(allowed_cpus), math.inf if ceiling is None else ceiling)
    least = LEAST_QUOTA_US / PERIOD_US
    if speed * usable >= least:
        return NodeQuota(speed * usable)
    problem = (
        f"node {node} runs at {least / usable:.1%} of its {usable:g} usable CPUs, not {speed:.1%}: "
        f"the kernel's least quota is {least:g} CPUs"
    )
    return NodeQuota(least, problem)


@dataclass(frozen=True)
class SpeedControl:
    """Where this machine's CPU controller is writable, and which version it is."""

    root: Path | None
    version: int = 1
    missing: str | None = None
    """Why nodes cannot be slowed here (None when they can)."""

    @classmethod
    def detect(cls, v1: Path = V1, v2: Path = V2) -> SpeedControl:
        if (v1 / "cpu.cfs_quota_us").exists():
            if os.access(v1, os.W_OK):
                return cls(v1, 1)
            return cls(None, missing=f"{v1} is not writable here (the sandbox needs root to slow its nodes)")
        controllers = v2 / "cgroup.controllers"
        if controllers.exists() and "cpu" in controllers.read_text().split():
            if os.access(v2, os.W_OK):
                return cls(v2, 2)
            return cls(None, missing=f"{v2} is not writable here (the sandbox needs root to slow its nodes)")
        return cls(None, missing="no CPU controller (cgroup v1 cpu or v2 cpu) is mounted")

    def path(self, sandbox: Path, node: str) -> Path | None:
        if self.root is None:
            return None
        tag = hashlib.sha256(str(sandbox).encode()).hexdigest()[:8]
        return self.root / f"advisor-sandbox-{tag}-{node}"

    def slow_group(
        self, sandbox: Path, node: str, speed: float, cpus_per_node: int
    ) -> tuple[Path | None, list[str]]:
        """The group of a node that runs at ``speed`` (`node_quota` of the CPUs this process may use), and
        what keeps it from that speed; a node whose quota the kernel refuses runs at full speed."""
        usable = len(os.sched_getaffinity(0))
        quota = node_quota(node, speed, cpus_per_node, usable, quota_cores())
        notes = [quota.problem] if quota.problem else []
        try:
            return self.group(sandbox, node, quota.cores), notes
        except OSError as error:
            return None, [*notes, f"node {node} runs at full speed: its CPU quota was refused ({error})"]

    def group(self, sandbox: Path, node: str, cores: float) -> Path | None:
        """A cgroup for ``node`` of the sandbox at ``sandbox`` capped at ``cores`` CPUs; None where there is
        no controller, OSError where the kernel refuses it. Named by the sandbox's folder, so sandboxes side
        by side never share one."""
        path = self.path(sandbox, node)
        if path is None:
            return None
        path.mkdir(exist_ok=True)
        quota = max(LEAST_QUOTA_US, round(cores * PERIOD_US))
        if self.version == 1:
            (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (path / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        return path


def join(group: Path) -> None:
    """Moves the calling process into ``group``: run in the child before it becomes the daemon, so the
    daemon and everything it starts are capped from their first instruction."""
    (group / "cgroup.procs").write_text("0")


def remove(group: Path) -> None:
    """The group, once its processes are gone (a group still in use stays: the kernel refuses)."""
    with contextlib.suppress(OSError):
        group.rmdir()
