"""The replay experiment and its command, end to end on small synthetic data (the discrete-event mode)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.harness.experiment import InventoryError, load_inventory, matching_backfill
from benchmarks.replay import main as replay_main

from .replay_support import write_philly, write_steps, write_workload

ROOT = Path(__file__).resolve().parent.parent
INVENTORY = """
[[pools]]
partition = "a100"
gpu_type = "a100"
nodes = 1
gpus_per_node = 8

[[pools]]
partition = "v100"
gpu_type = "v100"
nodes = 1
gpus_per_node = 8

[[pools]]
partition = "t4"
gpu_type = "t4"
nodes = 2
gpus_per_node = 4
"""


@pytest.mark.parametrize("name", ["replay-cluster.toml", "replay-philly.toml"])
def test_the_shipped_inventories_are_the_four_gpu_types(name: str) -> None:
    inventory = load_inventory(ROOT / "etc" / name)
    assert sorted(pool.gpu_type for pool in inventory.pools) == ["a100", "rtx", "t4", "v100"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[pools]]\npartition = 'a100'\n", "pools.0.gpu_type: Field required"),
        ("[[pools]\n", "not valid TOML"),
        ("pools = []\n", "pools: List should have at least 1 item"),
    ],
)
def test_a_bad_inventory_names_its_file_and_field(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InventoryError, match=rf"^{path}: .*") as caught:
        load_inventory(path)
    assert expected in str(caught.value)


def replay(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    """`benchmarks/replay.py WORDS` in this process: its exit status, stdout and stderr."""
    try:
        status = replay_main(list(words))
    except SystemExit as exit:
        status = int(exit.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def test_the_replay_command_names_a_bad_file_and_stops_cleanly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "cluster.toml"
    bad.write_text("[[pools]\n", encoding="utf-8")
    status, _, err = replay(capsys, "--inventory", str(bad))
    assert status == 2
    assert err.startswith(f"replay: error: {bad}: not valid TOML")
    assert "Traceback" not in err


def test_keeping_the_sandboxes_needs_a_new_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A used folder would hand a new cluster an old one's state and logs: refused before any arm runs."""
    (tmp_path / "old.log").write_text("", encoding="utf-8")
    status, _, err = replay(capsys, "--mode", "slurm", "--keep", str(tmp_path))
    assert status == 2
    assert f"--keep {tmp_path}: not empty" in err


def test_the_twin_of_a_compressed_run_keeps_its_window_and_minute_in_workload_seconds() -> None:
    twin = matching_backfill(400)
    assert twin.limit_resolution_s == 24_000
    assert twin.planned(3600) == 24_000 and twin.planned(24_001) == 48_000
    assert twin.window_s == 1440 * 60 * 400


def test_the_replay_command_writes_a_report_per_workload_and_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    (data / "sia" / "workloads" / "saturn").mkdir(parents=True)
    (data / "philly").mkdir()
    write_steps(data / "sia" / "step_times.csv")
    write_philly(data / "philly" / "jobs.csv", [600, 1200, 3600, 7200, 14400, 300, 900, 60])
    arrivals = [(100.0 * i, "toy" if i % 2 else "big", 4 if i % 3 else 2, 128) for i in range(12)]
    write_workload(data / "sia" / "workloads" / "saturn" / "w.csv", arrivals)
    (tmp_path / "cluster.toml").write_text(INVENTORY, encoding="utf-8")
    out = tmp_path / "out"
    argv = ["saturn/*.csv", "--data", str(data), "--inventory", str(tmp_path / "cluster.toml")]
    argv += ["--out", str(out)]
    status, stdout, stderr = replay(capsys, *argv)
    assert status == 0, stderr
    assert "| saturn-w | sim |" in stdout
    figures = json.loads((out / "saturn-w" / "sim" / "report.json").read_text(encoding="utf-8"))
    assert {arm: summary["jobs"] for arm, summary in figures["arms"].items()} == {
        "habits": 12,
        "slurm": 12,
        "advisor": 12,
        "oracle": 12,
    }
    assert figures["wait_errors"]["advisor"]["advisor"]["jobs"] == 12, "the advisor arm asks both estimators"
    report = (out / "saturn-w" / "sim" / "report.md").read_text(encoding="utf-8")
    assert "MAPE" in report and "simulated in real time" in report
    assert (out / "saturn-w" / "sim" / "completion_cdf.png").stat().st_size > 0
    assert (out / "summary.md").read_text(encoding="utf-8") in stdout

    status, stdout, stderr = replay(capsys, *argv, "--philly", "0")
    assert status == 0, stderr
    assert "| philly-all | sim |" in stdout
    figures = json.loads((out / "philly-all" / "sim" / "report.json").read_text(encoding="utf-8"))
    assert figures["arms"]["advisor"]["jobs"] == 8, "every job of the trace, with a Sia application"
    assert f"--inventory {tmp_path / 'cluster.toml'} --out {out} --philly 0`" in stdout, "as run"
