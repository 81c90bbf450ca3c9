"""Which machine a benchmark ran on, and how many of its CPUs the run may use."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path

import torch

from advisor.cgroups import quota_cores
from advisor.records import Fingerprint

_CPUINFO = Path("/proc/cpuinfo")
_NVIDIA_SMI_TIMEOUT_S = 10


def threads_for_job(environ: Mapping[str, str]) -> int:
    """The CPUs Slurm gave this job (capped by the affinity mask), or the affinity mask outside Slurm.

    The runner sets torch's thread count to this, so a partition whose jobs get fewer CPUs really
    measures slower, as its users' jobs will be.
    """
    available = len(os.sched_getaffinity(0))
    if "SLURM_JOB_ID" not in environ:
        return available
    for name in ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"):
        value = environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return min(int(value), available)
    return available


def fingerprint(partition: str | None, environ: Mapping[str, str] | None = None) -> Fingerprint:
    """This machine; ``cpu_cores`` is the torch thread count, so set it before fingerprinting."""
    env = os.environ if environ is None else environ
    cuda = torch.cuda.is_available()
    return Fingerprint(
        partition=partition,
        node=env.get("SLURMD_NODENAME") or socket.gethostname(),
        device="cuda" if cuda else "cpu",
        gpu_name=torch.cuda.get_device_name(0) if cuda else None,
        gpu_count=torch.cuda.device_count() if cuda else 0,
        gpu_memory_mb=torch.cuda.get_device_properties(0).total_memory // 2**20 if cuda else None,
        driver=_driver() if cuda else None,
        cuda=torch.version.cuda if cuda else None,
        cudnn=str(torch.backends.cudnn.version()) if cuda else None,  # type: ignore[no-untyped-call]
        cpu_model=cpu_model(_CPUINFO),
        cpu_cores=torch.get_num_threads(),
        torch=torch.__version__,
        cpu_quota=quota_cores(),
    )


def cpu_model(cpuinfo: Path) -> str:
    try:
        text = cpuinfo.read_text()
    except OSError:
        return "unknown"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model") and value.strip():
            return value.strip()
    return "unknown"


def _driver() -> str | None:
    """The NVIDIA driver version from nvidia-smi, else the CUDA driver API version torch reports."""
    executable = shutil.which("nvidia-smi")
    if executable is not None:
        try:
            completed = subprocess.run(
                [executable, "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=_NVIDIA_SMI_TIMEOUT_S,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            pass
        else:
            versions = completed.stdout.split()
            if versions:
                return versions[0]
    # torch has no public accessor for it; CUDA builds carry this one.
    version: int = torch._C._cuda_getDriverVersion()  # type: ignore[attr-defined]
    return f"cuda-driver-api-{version // 1000}.{version % 1000 // 10}"
