"""The measuring-jobs use case (`advisor/bench/measuring.py`) that the night, `advisor comm measure` and first
sight share, against recorded Slurm answers (the sandbox runs them in test_bench_slurm, test_comm_sandbox)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from advisor.bench.measuring import UNFINISHED, BenchJob, JobToSubmit, finish_jobs, submit_jobs
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import CommandResult
from advisor.slurm.testing import RecordedRunner

RECORDING = Path(__file__).parent / "data" / "slurm" / "sandbox-22.05.recording.json"
REFUSAL = "sbatch: error: invalid partition specified: cpu\n"


def test_each_job_is_submitted_once_a_refusal_leaves_the_others_and_leftovers_are_cancelled_then_ingested(
    tmp_path: Path,
) -> None:
    recorded = RecordedRunner.load(RECORDING)
    runner = RecordedRunner(
        [
            *recorded.answers,
            CommandResult(("sbatch", "--partition=t4"), 0, "Submitted batch job 41\n", ""),
            CommandResult(("sbatch", "--partition=cpu"), 1, "", REFUSAL),
            CommandResult(("scancel",), 0, "", ""),
        ]
    )
    client = SlurmClient(runner)
    planned = [
        JobToSubmit("t4", "#!/bin/sh\ntrue\n", ["--partition=t4"], tmp_path / "t4.jsonl"),
        JobToSubmit("cpu", "#!/bin/sh\ntrue\n", ["--partition=cpu"], tmp_path / "cpu.jsonl"),
    ]
    night = submit_jobs(client, planned)
    assert night.jobs == [BenchJob(partition="t4", job_id=41, results=tmp_path / "t4.jsonl")]
    assert night.refused == {"cpu": REFUSAL.strip()}, "Slurm's words, on one line"

    ingested: list[list[BenchJob]] = []

    def ingest(jobs: Sequence[BenchJob]) -> int:
        ingested.append(list(jobs))
        return 3

    measured = finish_jobs(client, night, timedelta(0), ingest)  # the window has closed at once
    assert measured.states == {41: UNFINISHED} and measured.cancelled == [41]
    assert ingested == [night.jobs], "a cancelled job's lines are ingested like the rest"
    assert measured.stored == 3 and measured.failed
    submitted = [call.argv for call in runner.calls if call.argv[0] == "sbatch"]
    assert [argv[1] for argv in submitted] == ["--partition=t4", "--partition=cpu"], "each once"
    assert [call.argv for call in runner.calls if call.argv[0] == "scancel"] == [("scancel", "41")]
