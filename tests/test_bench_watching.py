"""What `bench submit` and `comm measure` show of their jobs: a progress bar on a terminal while they wait
(before: nothing for minutes), the jobs and refusals as lines, how they ended as lines or JSON; and the
`--json` of the bench and comm commands that print data."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from advisor.bench.measuring import UNFINISHED, BenchJob, Measured, Night
from advisor.bench.watching import measured_json, progress_on, said_measured, said_submitted
from advisor.cli import main
from tests.recommend_support import FIXTURE

NIGHT = Night(
    jobs=[
        BenchJob(partition=name, job_id=n, results=Path(f"/r/{n}.jsonl"))
        for n, name in ((7, "cpu"), (8, "t4"))
    ],
    refused={"v100": "sbatch: error: Batch job submission failed: Partition inactive"},
)


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=100, color_system=None), out


def test_a_terminal_sees_the_jobs_ended_out_of_those_slurm_took_while_the_command_waits() -> None:
    lines, said = _console(terminal=False)
    terminal, shown = _console(terminal=True)
    with progress_on(terminal, "the benchmarks", said_submitted(lines, "benchmarked", quiet=False)) as watch:
        watch.submitted(NIGHT)
        watch.polled({})
        watch.polled({7: "COMPLETED"})
    assert "waiting on the benchmarks" in shown.getvalue() and "1/2 ended" in shown.getvalue()
    assert said.getvalue().splitlines() == [
        "cpu: job 7",
        "t4: job 8",
        "v100: not benchmarked, Slurm refused the job: sbatch: error: Batch job submission failed: "
        "Partition inactive",
    ]
    piped, nothing = _console(terminal=False)
    quiet, none_said = _console(terminal=False)
    with progress_on(piped, "the benchmarks", said_submitted(quiet, "benchmarked", quiet=True)) as watch:
        watch.submitted(NIGHT)
        watch.polled({7: "COMPLETED", 8: "FAILED"})
    assert nothing.getvalue() == "" and none_said.getvalue() == "", "a log gets the lines alone"


def test_how_the_jobs_ended_reads_as_lines_and_as_json() -> None:
    measured = Measured(night=NIGHT, states={7: "COMPLETED", 8: UNFINISHED}, cancelled=[8], stored=12)
    lines, said = _console(terminal=False)
    said_measured(lines, measured, Path("/db/advisor.db"))
    assert said.getvalue().splitlines() == [
        "cpu: job 7: COMPLETED",
        "t4: job 8: cancelled at the window's end",
        "12 new rows in /db/advisor.db",
    ]
    answer = json.loads(measured_json(measured, Path("/db/advisor.db")))
    assert answer["jobs"] == [
        {"partition": "cpu", "job_id": 7, "state": "COMPLETED", "cancelled": False, "results": "/r/7.jsonl"},
        {"partition": "t4", "job_id": 8, "state": UNFINISHED, "cancelled": True, "results": "/r/8.jsonl"},
    ]
    assert answer["refused"] == NIGHT.refused and (answer["stored"], answer["db"]) == (12, "/db/advisor.db")


def test_bench_ingest_plan_and_comm_show_say_it_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = ["--db", str(tmp_path / "advisor.db")]
    lines = sum(1 for line in FIXTURE.read_text().splitlines() if line.strip())
    assert main(["bench", "ingest", str(FIXTURE), *db, "--json"]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert 0 < stored["stored"] <= lines and stored["results"] == [str(FIXTURE)]
    assert main(["bench", "ingest", str(FIXTURE), *db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stored"] == 0, "ingestion is idempotent"
    assert main(["bench", "plan", "--quick", "--device=cpu", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["measurements"] == sum(row["items"] for row in plan["rows"])
    monkeypatch.setenv("COLUMNS", "150")
    assert main(["comm", "show", "--partition=a100", *db]) == 0
    shown = capsys.readouterr().out
    assert "default (never measured)" in shown and " µs + " in shown and " us " not in shown, shown
    assert main(["comm", "show", "--partition=a100", *db, "--json"]) == 0
    (link,) = json.loads(capsys.readouterr().out).values()
    assert link["measured"] is False and link["node"]["bus_bytes_s"] > 0


def test_bench_run_json_is_the_only_thing_on_stdout_and_counts_what_it_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the job's raw summary JSON, then a line, and no --json."""
    run = [
        "bench",
        "run",
        "--architecture=tests.factories.cnn:build",
        "--input-shape=3,16,16",
        "--layers-only",
    ]
    run += ["--budget-minutes=0.02", "--out", str(tmp_path / "run.jsonl"), "--db", str(tmp_path / "a.db")]
    assert main([*run, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    summary = answer["run"]
    assert answer["stored"] == summary["measured"] > 0 and answer["results"] == [str(tmp_path / "run.jsonl")]
    assert summary["planned"] == sum(
        summary[key] for key in summary if key not in ("run_id", "planned", "elapsed_s")
    )
