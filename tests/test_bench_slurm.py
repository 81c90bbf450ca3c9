"""The nightly benchmark as real Slurm jobs on the sandbox cluster, ingested into a real SQLite store."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from advisor.bench.measuring import UNFINISHED, BenchJob, Pace, cancel_leftovers, wait_for_jobs
from advisor.bench.results import read_jsonl
from advisor.bench.submit import BenchRequest, ingest_results, job_options, job_script, submit_benchmarks
from advisor.sandbox.cluster import Sandbox
from advisor.settings.validated import BenchSettings
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner
from advisor.slurm.testing import RecordedRunner
from advisor.store import Store

BIN = Path(sys.executable).parent
RECORDING = Path(__file__).parent / "data" / "slurm" / "sandbox-22.05.recording.json"


def request(tmp_path: Path, plan_limit: int) -> BenchRequest:
    return BenchRequest(
        python=sys.executable,
        results_dir=tmp_path / "results",
        budget=timedelta(minutes=4),
        quick=True,
        one_at_a_time=True,
        extra=("--plan-limit", str(plan_limit)),
        site=BenchSettings(cpu_only=True),  # the sandbox's GPUs are gres entries, not devices
    )


def test_two_partitions_measure_and_land_rows_with_their_fingerprints(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    client = SlurmClient(LocalRunner(env=sandbox.client_env()))
    partitions = [p for p in client.partitions() if p.name in {"cpu", "t4"}]
    night = submit_benchmarks(client, partitions, request(tmp_path, plan_limit=5), datetime.now(UTC))
    jobs = night.jobs
    assert night.refused == {}
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
        rows = [r for r in store.step_rows(fingerprint.machine()) if r.batch == 16]
        assert len(rows) == 4 and all(r.fits and (r.median_s or 0) > 0 for r in rows), fingerprint.partition


def test_a_benchmark_left_running_at_the_windows_end_is_cancelled_and_keeps_what_it_measured(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    client = SlurmClient(LocalRunner(env=sandbox.client_env()))
    cpu = [p for p in client.partitions() if p.name == "cpu"]
    [job] = submit_benchmarks(client, cpu, request(tmp_path, plan_limit=40), datetime.now(UTC)).jobs
    deadline = time.monotonic() + 180
    while not (job.results.exists() and len(read_jsonl(job.results)) >= 2):
        assert time.monotonic() < deadline, "the benchmark measured nothing"
        time.sleep(0.5)
    window_closed = wait_for_jobs(client, [job], timeout=timedelta(0))
    assert cancel_leftovers(client, window_closed) == [job.job_id], "still running when the window closed"
    states = wait_for_jobs(client, [job], timeout=timedelta(minutes=2), poll_s=1.0)
    assert states[job.job_id].startswith("CANCELLED")
    measured = read_jsonl(job.results)
    assert 2 <= len(measured) < 40
    assert ingest_results(Store.open(tmp_path / "advisor.db"), [job]) == len(measured)


def test_a_night_with_a_partition_slurm_refuses_benchmarks_the_others_and_trains(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    admin = LocalRunner(env=sandbox.client_env())
    env = {**sandbox.client_env(), "PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path)}
    db, night = str(tmp_path / "advisor.db"), ["bench", "submit", "--partition", "cpu", "--partition", "v100"]
    night += ["--quick", "--cpu-only", "--one-at-a-time", "--budget-minutes", "3", "--db", db]
    night += ["--results-dir", str(tmp_path / "bench"), "--job-arg=--plan-limit", "--job-arg=10"]
    assert (
        admin.run(["scontrol", "update", "partitionname=v100", "state=inactive"], timeout=20).returncode == 0
    )
    try:
        benched = subprocess.run([str(BIN / "advisor"), *night], env=env, capture_output=True, text=True)
    finally:
        admin.run(["scontrol", "update", "partitionname=v100", "state=up"], timeout=20)
    assert benched.returncode == 1, "a partition went unbenchmarked: the night says so"
    assert "v100: not benchmarked, Slurm refused the job: sbatch: error: " in benched.stdout, benched.stdout
    assert re.search(r"^cpu: job \d+: COMPLETED$", benched.stdout, re.MULTILINE), benched.stdout
    trained = subprocess.run(
        [str(BIN / "advisor"), "models", "train", "--db", db, "--models-dir", str(tmp_path / "models")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert re.search(r": version 1 from \d+ steps and \d+ layers", trained.stdout), trained.stdout


def test_a_job_slurmctld_saw_end_has_ended_though_accounting_has_not_heard_yet(tmp_path: Path) -> None:
    """slurmdbd learns of an end after slurmctld does (never, while their link is down): the wait takes
    slurmctld's word and asks accounting only for the jobs slurmctld no longer shows ended."""
    recorded = RecordedRunner.load(RECORDING)
    sacct = next(answer for answer in recorded.answers if "sacct" in answer.argv)
    lagging = json.loads(sacct.stdout)
    lagging["jobs"] = [job for job in lagging["jobs"] if job["job_id"] != 1]
    others = [answer for answer in recorded.answers if answer is not sacct]
    runner = RecordedRunner([*others, replace(sacct, stdout=json.dumps(lagging))])
    # The recording's squeue: job 1 COMPLETED (kept for MinJobAge), 2 RUNNING, 3 PENDING.
    jobs = [BenchJob(partition="cpu", job_id=n, results=tmp_path / f"{n}.jsonl") for n in (1, 2)]
    assert wait_for_jobs(SlurmClient(runner), jobs, timeout=timedelta(0)) == {1: "COMPLETED", 2: UNFINISHED}
    (asked,) = [call.argv for call in runner.calls if "sacct" in call.argv]
    assert "--jobs=2" in asked


def test_the_wait_looks_ever_less_often_up_to_once_a_minute_and_stops_at_its_timeout(tmp_path: Path) -> None:
    runner = RecordedRunner.load(RECORDING)
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    running = [BenchJob(partition="cpu", job_id=2, results=tmp_path / "2.jsonl")]  # RUNNING when recorded
    looks: list[dict[int, str]] = []
    pace = Pace(clock=lambda: now[0], sleep=sleep)
    states = wait_for_jobs(SlurmClient(runner), running, timedelta(minutes=4), pace=pace, polled=looks.append)
    assert states == {2: UNFINISHED}
    assert looks == [{}] * (len(slept) + 1), "each look told, none ended yet"
    assert slept == [2, 4, 8, 16, 32, 60, 60, 58], "doubling from 2 s to a minute, the last up to the timeout"
    assert sum(call.argv[0] == "squeue" for call in runner.calls) == len(slept) + 1


def test_benchmark_jobs_ask_for_one_gpu_and_the_sites_terms_not_a_node() -> None:
    client = SlurmClient(RecordedRunner.load(RECORDING))
    t4, cpu = (next(p for p in client.partitions() if p.name == name) for name in ("t4", "cpu"))
    site = BenchSettings(account="ops", qos="bench", reservation="nightly", constraint="ib", memory="32G")
    night = BenchRequest(
        python="/opt/advisor/bin/python", results_dir=Path("/b"), budget=timedelta(minutes=45)
    )
    options = job_options(replace(night, site=site), t4, "stamp")
    assert "--exclusive" not in options and "--mem=0" not in options
    assert {"--gres=gpu:1", "--cpus-per-task=8", "--mem=32G", "--account=ops", "--qos=bench"} <= set(options)
    assert {"--reservation=nightly", "--constraint=ib", "--time=00:50:00"} <= set(options)
    assert "--cpus-per-task=1" in job_options(night, cpu, "stamp"), "no more CPUs than its nodes have"
    assert "--device cuda" in job_script(night, t4, Path("/b/t4.jsonl")), "a GPU partition measures its GPU"
    assert "--device cpu" in job_script(night, cpu, Path("/b/cpu.jsonl"))
    emulated = replace(night, site=BenchSettings(cpu_only=True))
    assert "--device cpu" in job_script(emulated, t4, Path("/b/t4.jsonl"))


def test_first_sight_measures_a_new_architecture_where_a_benchmarked_machine_lacks_it(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A factory's layers (its code is never imported by the job) on the partition benchmarked before;
    none on a partition never benchmarked (its first night comes first); once, at the lowest priority."""
    import contextlib

    from advisor.bench.architectures import Architectures, measured_geometries
    from advisor.bench.first_sight import NICE, FirstSight
    from advisor.bench.zoo import distinct_layers
    from advisor.introspect.run import introspect
    from advisor.policy.schema import FirstSightRules
    from advisor.records import LayerConfig, LayerMeasurement, ResultLine

    client = SlurmClient(LocalRunner(env=sandbox.client_env()))
    store, now = Store.open(tmp_path / "advisor.db"), datetime.now(UTC)
    # Last night t4 was benchmarked (one layer, as far as this store knows); cpu never was.
    fingerprint = read_jsonl(Path(__file__).parent / "data" / "predict" / "cpu-zoo.jsonl")[0].fingerprint
    seen = LayerConfig(
        op="linear", in_channels=4, out_channels=4, kernel=(1, 1), stride=(1, 1), padding=(0, 0),
        dilation=(1, 1), groups=1, height=1, width=1, batch=1, amp=False, cudnn_benchmark=True,
    )  # fmt: skip
    measurement = LayerMeasurement(config=seen, median_s=1e-5, fits=True)
    t4 = fingerprint.model_copy(update={"partition": "t4", "node": "t4-1"})
    store.ingest([ResultLine(run_id="last-night", fingerprint=t4, measured_at=now, measurement=measurement)])
    table = introspect("tests.factories.cnn:build", (3, 16, 16), {"width": 12}, allow_factories=True)
    Architectures(store).record(table, now, batch=8)
    sight = FirstSight(
        client=client,
        store=lambda: contextlib.nullcontext(store),
        rules=lambda: FirstSightRules(enabled=True, minutes=2),
        python=sys.executable,
        results_dir=tmp_path / "results",
        site=BenchSettings(cpu_only=True),
        clock=lambda: now,
    )
    jobs = sight()
    assert [job.partition for job in jobs] == ["t4"]
    assert f"Nice={NICE}" in " ".join(f"{k}={v}" for k, v in client.show_job(jobs[0].job_id).items())
    assert sight() == [], "submitted once"
    states = wait_for_jobs(client, jobs, timeout=timedelta(minutes=8), poll_s=2.0)
    assert set(states.values()) == {"COMPLETED"}, states
    sight()  # ingests what the job measured
    machines = {f.machine() for f in store.fingerprints() if f.partition == "t4"} - {t4.machine()}
    (machine,) = machines
    assert {config for config, _ in distinct_layers(table)} <= measured_geometries(store, machine)
    assert store.step_rows(machine) == [], "a factory is never built by the advisor's job"
