"""`benchmarks/gpu/check.sh --device cpu`: the GPU check's every part runs, and says what it measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.bench.results import read_jsonl

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.long
def test_the_gpu_check_runs_each_part_on_a_cpu_and_prints_its_table(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # The bench job as a process, as a Slurm job step would start it: its fingerprint comes from Slurm's
    # variables.
    slurm = {"SLURM_JOB_ID": "1", "SLURM_CPUS_PER_TASK": "1", "SLURMD_NODENAME": "n1"}
    env = {**os.environ, **slurm, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [str(REPO / "benchmarks" / "gpu" / "check.sh"), "--device", "cpu", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in out.iterdir()) == [
        "bench.jsonl",
        "bench.log",
        "pytest.txt",
        "speedup.txt",
        "summary.txt",
        "versions.txt",
    ]
    lines = read_jsonl(out / "bench.jsonl")
    assert lines and all(line.fingerprint.node == "n1" and line.fingerprint.cpu_cores == 1 for line in lines)
    log = (out / "bench.log").read_text().splitlines()
    events = [json.loads(line) for line in log if line.startswith('{"event"')]
    (run,) = [json.loads(line) for line in log if line.startswith('{"run_id"')]
    assert [event["index"] for event in events] == list(range(1, run["planned"] + 1))
    counted = ("measured", "did_not_fit", "skipped_budget", "skipped_series", "failed")
    assert sum(run[name] for name in counted) == run["planned"]
    assert run["measured"] + run["did_not_fit"] == len(lines), "a JSON line for each step or layer it ran"
    measured = [line.measurement for line in lines if line.measurement.median_s]
    # Three seconds of a CPU reach a coarse step that fits them (and whatever cheap layers still fit).
    assert measured[0].kind == "step"
    summary = result.stdout
    assert summary == (out / "summary.txt").read_text()
    assert "step measured: plain" in summary and "bench: exit 0" in summary
    assert (
        "squeezenet1_1        baseline" in summary and "amp fp16" in summary and "speedup: exit 0" in summary
    )
    assert "pytest: exit 0" in summary, "the CUDA-only tests are collected (and skipped without CUDA)"


def test_the_check_refuses_an_unknown_device(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(REPO / "benchmarks" / "gpu" / "check.sh"), "--device", "tpu", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "cuda or cpu" in result.stderr
