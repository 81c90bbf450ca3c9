"""Partitions that really differ in speed on one machine: each slow node's slurmd (and so every job step
it starts, which inherits its cgroup under ``proctrack/linuxproc``) runs in a CPU cgroup capped at its share
of the cores its jobs may use.

The kernel's CPU controller does the capping: cgroup v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``
or v2's ``cpu.max``. Where neither can be written (not root, no controller mounted), nodes run at full
speed and `SpeedControl.missing` says why.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from advisor.cgroups import V1, V2

PERIOD_US = 100_000


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

    def group(self, sandbox: Path, node: str, cores: float) -> Path | None:
        """A cgroup for ``node`` of the sandbox at ``sandbox`` capped at ``cores`` CPUs; None where none can
        be made. Named by the sandbox's folder, so sandboxes side by side never share one."""
        path = self.path(sandbox, node)
        if path is None:
            return None
        path.mkdir(exist_ok=True)
        quota = max(1000, round(cores * PERIOD_US))
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
