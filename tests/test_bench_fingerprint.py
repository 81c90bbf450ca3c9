from __future__ import annotations

import os
from pathlib import Path

import torch

from advisor.bench.fingerprint import cpu_model, fingerprint, threads_for_job

AFFINITY = len(os.sched_getaffinity(0))


def test_outside_slurm_the_affinity_mask_decides() -> None:
    assert threads_for_job({}) == AFFINITY
    assert threads_for_job({"SLURM_CPUS_PER_TASK": "1"}) == AFFINITY  # no job: a stray variable


def test_inside_slurm_the_allocation_decides_capped_by_the_affinity_mask() -> None:
    job = {"SLURM_JOB_ID": "7"}
    assert threads_for_job({**job, "SLURM_CPUS_PER_TASK": "1", "SLURM_CPUS_ON_NODE": "64"}) == 1
    assert threads_for_job({**job, "SLURM_CPUS_ON_NODE": "1"}) == 1
    assert threads_for_job({**job, "SLURM_CPUS_ON_NODE": "100000"}) == AFFINITY
    assert threads_for_job({**job, "SLURM_CPUS_PER_TASK": "zero"}) == AFFINITY


def test_the_fingerprint_names_this_machine() -> None:
    found = fingerprint("cpu", {"SLURMD_NODENAME": "node-7"})
    assert found.partition == "cpu" and found.node == "node-7"
    assert found.cpu_cores == torch.get_num_threads()
    assert found.torch == torch.__version__ and found.cpu_model
    if not torch.cuda.is_available():
        assert found.device == "cpu" and found.gpu_count == 0 and found.gpu_name is None
        assert found.cuda is None and found.driver is None
    assert fingerprint(None, {}).node  # the host name outside Slurm
    assert found.machine() == fingerprint("other", {}).machine()  # the machine type ignores the node


def test_the_cpu_model_comes_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654\n")
    assert cpu_model(info) == "AMD EPYC 9654"
    assert cpu_model(tmp_path / "missing") == "unknown"
