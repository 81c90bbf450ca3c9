"""The nightly benchmark as real Slurm jobs on the sandbox cluster, ingested into a real SQLite store."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from advisor.bench.results import read_jsonl
from advisor.bench.submit import BenchRequest, ingest_results, submit_benchmarks, wait_for_jobs
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner
from advisor.store import Store


def request(tmp_path: Path, plan_limit: int) -> BenchRequest:
    return BenchRequest(
        python=sys.executable,
        results_dir=tmp_path / "results",
        budget=timedelta(minutes=4),
        quick=True,
        one_at_a_time=True,
        extra=("--plan-limit", str(plan_limit)),
    )


def test_two_partitions_measure_and_land_rows_with_their_fingerprints(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    client = SlurmClient(LocalRunner(env=sandbox.client_env()))
    partitions = [p for p in client.partitions() if p.name in {"cpu", "t4"}]
    jobs = submit_benchmarks(client, partitions, request(tmp_path, plan_limit=5), datetime.now(UTC))
    states = wait_for_jobs(client, jobs, timeout=timedelta(minutes=10), poll_s=1.0)
    assert set(states.values()) == {"COMPLETED"}, states

    store = Store.open(tmp_path / "advisor.db")
    assert ingest_results(store, jobs) == 10
    assert ingest_results(store, jobs) == 0, "ingesting the same results again stores nothing new"

    by_partition = {f.partition: f for f in store.fingerprints()}
    assert set(by_partition) == {"cpu", "t4"}
    assert by_partition["cpu"].node == "cpu-1"
    assert by_partition["t4"].node in {"t4-1", "t4-2"}
    assert by_partition["cpu"].cpu_cores == 1, "the cpu partition's nodes have one CPU"
    assert by_partition["t4"].cpu_cores == 2, "t4 nodes have 8 CPUs; this host has 2 cores"
    assert by_partition["cpu"].machine() != by_partition["t4"].machine()

    for fingerprint in by_partition.values():
        rows = [r for r in store.step_rows(fingerprint.machine()) if r["batch"] == 16]
        assert len(rows) == 4 and all(r["fits"] and r["median_s"] > 0 for r in rows), fingerprint.partition


def test_a_cancelled_benchmark_keeps_what_it_measured(sandbox: Sandbox, tmp_path: Path) -> None:
    client = SlurmClient(LocalRunner(env=sandbox.client_env()))
    cpu = [p for p in client.partitions() if p.name == "cpu"]
    [job] = submit_benchmarks(client, cpu, request(tmp_path, plan_limit=40), datetime.now(UTC))
    deadline = time.monotonic() + 180
    while not (job.results.exists() and len(read_jsonl(job.results)) >= 2):
        assert time.monotonic() < deadline, "the benchmark measured nothing"
        time.sleep(0.5)
    client.cancel(job.job_id)
    states = wait_for_jobs(client, [job], timeout=timedelta(minutes=2), poll_s=1.0)
    assert states[job.job_id].startswith("CANCELLED")
    measured = read_jsonl(job.results)
    assert 2 <= len(measured) < 40
    assert ingest_results(Store.open(tmp_path / "advisor.db"), [job]) == len(measured)
