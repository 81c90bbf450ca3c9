"""The runner's bookkeeping (budget, series, sink) and the job entry point; real measurements, kept tiny."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from advisor.bench.night import NightItem
from advisor.bench.plan import Phase, Plan, PlanItem
from advisor.bench.reporting import Event, describe_item
from advisor.bench.results import read_jsonl
from advisor.bench.run import Clocks, RunOn, run_plan
from advisor.bench.sweeps import swept
from advisor.records import LayerConfig, ResultLine, StepConfig

from .bench_support import CPU, TINY, one_thread  # noqa: F401 (an autouse fixture)
from .test_bench_neighbours import linear


def _plan(*batches: int, estimate_s: float = 1.0) -> Plan:
    items = tuple(
        PlanItem(phase=Phase.COARSE, config=TINY.model_copy(update={"batch": b}), estimate_s=estimate_s)
        for b in batches
    )
    return Plan(items=items, steps=2, warmup=0, repeats=2)


def test_each_result_reaches_the_sink_with_its_run_partition_and_date() -> None:
    lines: list[ResultLine] = []
    events: list[Event] = []
    when = datetime(2026, 12, 1, 3, tzinfo=UTC)
    summary = run_plan(
        _plan(2),
        RunOn(CPU, "p"),
        budget_s=600,
        sink=lines.append,
        progress=events.append,
        clocks=Clocks(dates=lambda: when),
    )
    assert summary.measured == 1 and len(lines) == 1
    assert lines[0].fingerprint.partition == "p" and lines[0].run_id == summary.run_id
    assert lines[0].measured_at == when
    assert [e.status for e in events] == ["measured"]


def test_larger_batches_of_a_series_are_skipped_once_one_does_not_fit() -> None:
    lines: list[ResultLine] = []
    summary = run_plan(
        _plan(2, 4, 8), RunOn(CPU, None, memory_limit_bytes=1), budget_s=600, sink=lines.append
    )
    assert (summary.did_not_fit, summary.skipped_series) == (1, 2)
    assert [line.measurement.fits for line in lines] == [False]


def test_items_whose_estimate_exceeds_the_remaining_budget_are_skipped() -> None:
    ticks: Iterator[float] = iter(range(0, 1000, 10))
    summary = run_plan(
        _plan(2, 4, estimate_s=50),
        RunOn(CPU, None),
        budget_s=30,
        sink=lambda _line: None,
        clocks=Clocks(budget=lambda: float(next(ticks))),
    )
    assert summary.skipped_budget == 2 and summary.measured == 0


@pytest.mark.parametrize(("learn", "measured"), [(False, 1), (True, 3)])
def test_a_first_sight_judges_what_is_left_by_how_long_its_items_took(learn: bool, measured: int) -> None:
    """Each call of the budget clock is 10 s: the first step takes 10 s of its 50 s estimate. Learning,
    the same step again is expected to take 10 s, another batch a fifth of its estimate: both fit in what
    is left; by the estimates alone neither does."""
    ticks: Iterator[float] = iter(range(0, 1000, 10))
    plan = _plan(2, 2, 4, estimate_s=50).model_copy(update={"learn_estimates": learn})
    summary = run_plan(
        plan,
        RunOn(CPU, None),
        budget_s=85,
        sink=lambda _line: None,
        clocks=Clocks(budget=lambda: float(next(ticks))),
    )
    assert (summary.measured, summary.skipped_budget) == (measured, 3 - measured)


_WRITER = textwrap.dedent(
    """
    import sys, time
    from datetime import UTC, datetime
    from pathlib import Path
    from advisor.bench.fingerprint import fingerprint
    from advisor.records import ResultLine, StepMeasurement, StepConfig
    from advisor.bench.results import jsonl_sink
    sink = jsonl_sink(Path(sys.argv[1]))
    config = StepConfig(model="m", input_size=32, batch=1, amp=False, channels_last=False,
                        pinned=False, workers=0)
    machine = fingerprint(None)
    for index in range(100000):
        measurement = StepMeasurement(
            config=config.model_copy(update={"batch": index + 1}), arch_hash="h", steps=1, median_s=0.1,
            non_device_share=0.0, peak_memory_bytes=1, fits=True)
        sink(ResultLine(run_id="r", fingerprint=machine, measured_at=datetime.now(UTC),
                        measurement=measurement))
    """
)


def test_the_jsonl_sink_keeps_every_complete_line_when_its_writer_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not path.exists() or path.read_text().count("\n") < 20):
            time.sleep(0.05)
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    assert writer.returncode == -signal.SIGKILL
    complete = path.read_text().count("\n")
    lines = read_jsonl(path)
    assert len(lines) == complete >= 20
    assert [line.measurement.config.batch for line in lines] == list(range(1, complete + 1))
    with path.open("a") as file:
        file.write('{"run_id": "torn')
    assert len(read_jsonl(path)) == complete


def test_a_broken_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text("{}\n")
    with pytest.raises(ValueError, match=r"results\.jsonl:1"):
        read_jsonl(path)


def test_an_architecture_is_measured_by_its_own_layers_and_whole_steps_until_the_budget_is_spent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`advisor bench run --architecture`: a user's factory, imported in the caller's process; its table is
    kept for training, which cannot import it. Its steps are measured again until the budget is spent."""
    from advisor.bench.architectures import Architectures, measured_tables
    from advisor.bench.zoo import distinct_layers
    from advisor.cli import main as cli
    from advisor.introspect.run import introspect
    from advisor.store import Store

    reference, db, out = "tests.factories.cnn:build", tmp_path / "advisor.db", tmp_path / "a.jsonl"
    words = ["bench", "run", "--architecture", reference, "--input-shape", "3,16,16", "--batch-sizes", "2"]
    words += ["--device", "cpu", "--budget-minutes", "0.25", "--db", str(db), "--out", str(out), "--json"]
    assert cli(words) == 0
    run = json.loads(capsys.readouterr().out)["run"]
    assert run["elapsed_s"] >= 0.8 * 15, "the budget is spent (the steps are planned again and again)"
    assert run["measured"] + run["skipped_budget"] == run["planned"], run
    store = Store.open(db)
    table = introspect(reference, (3, 16, 16), {}, allow_factories=True)
    steps, layers = store.step_rows(), store.layer_rows()
    assert {(row.model, row.batch, row.arch_hash) for row in steps} == {
        (reference, 2, table.architecture_hash)
    }
    assert {row.batch for row in layers} <= {2}
    assert len(layers) <= len(distinct_layers(table)), "each once: a layer repeats within its benchmark"
    assert all(row.fits for row in [*steps, *layers])
    assert Architectures(store).table(reference, 16) == table == measured_tables(store)(reference, 16)


def test_bench_plan_shows_what_a_first_sight_of_an_architecture_measures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from advisor.cli import main as cli

    words = ["bench", "plan", "--architecture", "tests.factories.cnn:build", "--input-shape", "3,16,16"]
    assert cli([*words, "--micro-batches", "2-32", "--budget-minutes", "1", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    rows = {row["part"]: row for row in shown["rows"]}
    assert list(rows) == ["whole steps", "layers", "whole steps again"]
    assert {row["process"] for row in shown["rows"]} == {1}, "a minute: too short for three processes"
    assert rows["whole steps"]["batches"] == [2, 32, 8, 4, 16]
    assert shown["budget_s"] == 60 and shown["measurements"] == sum(row["items"] for row in rows.values())
    assert cli([*words, "--micro-batches", "2-32", "--budget-minutes", "3", "--json"]) == 0
    parts = [(row["process"], row["part"]) for row in json.loads(capsys.readouterr().out)["rows"]]
    first = [(1, "whole steps"), (1, "layers"), (1, "whole steps again")]
    assert parts == [*first, (2, "whole steps again"), (3, "whole steps again")]
    assert cli([*words, "--layers-only", "--json"]) == 0
    assert [row["part"] for row in json.loads(capsys.readouterr().out)["rows"]] == ["layers"]
    assert cli([*words, "--budget-minutes", "3"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "│ 3 │ whole steps again │" in said
    assert (
        "(the steps again: each pass in an order of its own) in 3 fresh processes, one after another, each "
        "the budget left over the processes left, until the 00:03:00 budget is spent"
    ) in said
    assert cli([*words, "--layers-only"]) == 0
    assert "steps again" not in " ".join(capsys.readouterr().out.split()), "layers only: no passes"
    with pytest.raises(SystemExit):
        cli([*words, "--micro-batches", "32-2"])
    assert "low to high, not '32-2'" in capsys.readouterr().err


def test_a_job_that_finds_another_machine_runs_that_machines_first_night(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.bench.job import main as job
    from advisor.bench.night import Priority, Tonight
    from advisor.bench.plan import nightly_grid

    grid = nightly_grid("cpu")
    layer = PlanItem(
        phase=Phase.LAYERS,
        config=LayerConfig(
            op="linear",
            in_channels=8,
            out_channels=8,
            kernel=(1, 1),
            stride=(1, 1),
            padding=(0, 0),
            dilation=(1, 1),
            groups=1,
            height=1,
            width=1,
            batch=1,
            amp=False,
            cudnn_benchmark=True,
        ),
        estimate_s=0.1,
    )
    entries = (NightItem(priority=Priority.SUBMITTED, subject="x", item=layer),)
    fields = {"budget_s": 60.0, "entries": entries, "grid_items": 1, "covered": 0}
    counts = {"steps": grid.steps, "warmup": grid.warmup, "repeats": grid.repeats}
    for name, value in {"SLURM_JOB_ID": "1", "SLURM_CPUS_PER_TASK": "1", "SLURMD_NODENAME": "n1"}.items():
        monkeypatch.setenv(name, value)
    # A plan run as planned is `bench run --architecture`'s (above); here the machine is not the planned one.
    # The job as a process is the test above; here its entry point runs in this one.
    plan, out = tmp_path / "tonight.plan.json", tmp_path / "tonight.jsonl"
    plan.write_text(Tonight(machine="a machine this is not", **fields, **counts).model_dump_json())
    assert job(["--out", str(out), "--plan", str(plan), "--plan-limit", "1", "--device", "cpu"]) == 0
    (line,) = read_jsonl(out)
    # Not the planned layer: the new machine's first night, whose first item is its rates' first sweep.
    assert line.measurement.config == swept(grid.sweeps)[0][1] and line.measurement.fits


def test_a_zoo_transformers_item_is_described_by_its_tokens_and_an_images_by_its_side() -> None:
    def step(model: str, size: int) -> PlanItem:
        config = StepConfig(
            model=model, input_size=size, batch=4, amp=False, channels_last=False, pinned=False, workers=0
        )
        return PlanItem(phase=Phase.COARSE, config=config, estimate_s=1.0)

    assert describe_item(step("tiny_gpt2", 128)) == "tiny_gpt2 128 tokens batch 4"
    assert describe_item(step("resnet18", 32)) == "resnet18 32px batch 4"
    assert describe_item(step("vgg5x5", 64)) == "vgg5x5 64px batch 4"  # not in the zoo: first sight's


def test_a_plan_in_processes_measures_each_part_in_a_fresh_process_of_its_own_run() -> None:
    """A first sight's parts (`Plan.processes`): each a child ``advisor.bench.job`` with its share of the
    budget, its results and events relayed here, numbered in the whole plan, each part a run of its own."""
    items = tuple(PlanItem(phase=Phase.LAYERS, config=linear(w), estimate_s=0.1) for w in (8, 16, 24))
    plan = Plan(items=items, steps=2, warmup=0, repeats=2, processes=(1,))
    lines: list[ResultLine] = []
    events: list[Event] = []
    summary = run_plan(plan, RunOn(CPU, "p"), budget_s=300, sink=lines.append, progress=events.append)
    assert (summary.planned, summary.measured) == (3, 3)
    assert [(e.index, e.total, e.status) for e in events] == [(i, 3, "measured") for i in (1, 2, 3)]
    assert [line.measurement.config for line in lines] == [item.config for item in items]
    runs = [line.run_id for line in lines]
    assert runs[0] != runs[1] == runs[2], "part 1 (one item), part 2 (two): a run each"
    assert summary.run_id.split(",") == [runs[0], runs[1]]
    assert {line.fingerprint.partition for line in lines} == {"p"}
