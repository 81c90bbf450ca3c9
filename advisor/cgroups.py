"""The kernel's CPU controller as a process sees it: where cgroup v1's and v2's files live, and the quota
that caps this process, if any (the standard library only)."""

from __future__ import annotations

from pathlib import Path

V1 = Path("/sys/fs/cgroup/cpu")
V2 = Path("/sys/fs/cgroup")


def quota_cores(cgroup_file: Path = Path("/proc/self/cgroup"), v1: Path = V1, v2: Path = V2) -> float | None:
    """The CPUs this process's CPU cgroup may use, or None where it is not capped: what a benchmark's
    fingerprint records, so capped and uncapped nodes are different machines."""
    try:
        lines = cgroup_file.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if "cpu" in controllers.split(","):
            return _v1_quota(v1 / relative)
        if controllers == "" and (v2 / relative / "cpu.max").exists():
            quota, _, period = (v2 / relative / "cpu.max").read_text().partition(" ")
            return None if quota == "max" else int(quota) / int(period)
    return None


def _v1_quota(group: Path) -> float | None:
    try:
        quota = int((group / "cpu.cfs_quota_us").read_text())
        period = int((group / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 else quota / period
