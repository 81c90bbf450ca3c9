"""What people read: `advisor status`, `models list`, `predict`, `report` and `parse` on a trained store
show no raw float, Python repr, microsecond timestamp or machine hash without its name."""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.bench.results import read_jsonl
from advisor.cli import main
from advisor.machines import machine_names
from advisor.predict.registry import machines
from advisor.store import ModelRegistry, Store
from tests.recommend_support import FIXTURE, relabel

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
UNREADABLE = {
    "a float's digits": re.compile(r"\d\.\d{4,}"),
    "a Python None, True or False": re.compile(r"\b(None|True|False)\b"),
    "a repr of a list, tuple or dict": re.compile(r"\['|\{'|\(\d+, \d+"),
    "a timestamp with seconds and microseconds": re.compile(r"\d{2}:\d{2}:\d{2}\.\d+"),
    "a duration read as a date": re.compile(r"\b\d+-\d{2}:\d{2}:\d{2}\b"),
}


def _predicted(capsys: pytest.CaptureFixture[str], words: list[str]) -> dict[str, Any]:
    assert main(words) == 0
    answer: dict[str, Any] = json.loads(capsys.readouterr().out)
    return answer


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One machine (the t4's, from the CPU zoo) trained once, with nine more versions listed beside it:
    a ten-row `models list`."""
    root = tmp_path_factory.mktemp("outputs")
    store = Store.open(root / "advisor.db")
    store.ingest(relabel(line, "t4") for line in read_jsonl(FIXTURE))
    (machine,) = machines(store)
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        assert (
            main(
                [
                    "models",
                    "train",
                    "--json",
                    "--db",
                    str(root / "advisor.db"),
                    "--models-dir",
                    str(root / "m"),
                ]
            )
            == 0
        )
    (trained,) = json.loads(said.getvalue())  # `models train --json`: each machine's new version
    assert (trained["machine"], trained["name"], trained["activated"]) == (machine, "t4", True)
    row = ModelRegistry(store).versions(machine)[0]
    for _ in range(9):
        ModelRegistry(store).add_version(
            machine, lambda version: row.model_copy(update={"version": version}), False
        )
    ModelRegistry(store).set_active(machine, trained["version"])
    store.db.conn.close()
    yield root


def test_what_the_commands_print_is_readable(
    trained: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("ADVISOR_SOCKET", str(trained / "absent.sock"))
    monkeypatch.setenv("SLURM_CONF", str(trained / "absent.conf"))  # no queue: Slurm cannot be asked
    db = ["--db", str(trained / "advisor.db")]
    shown = {}
    predict = ["predict", "--model=resnet18", "--input-shape=3,32,32", "--batch-size=32", "--partition=t4"]
    for words in (
        ["models", "list", *db],
        ["status", *db],
        [*predict, *db],
        [*predict, "--steps=20000000", *db],
        ["report", *db],
        ["parse", str(EXAMPLES / "demo.sbatch")],
    ):
        main(words)
        shown[" ".join(words[:2])] = capsys.readouterr().out
    (machine,) = machine_names(Store.existing(trained / "advisor.db").fingerprints())
    for command, text in shown.items():
        for what, pattern in UNREADABLE.items():
            assert not pattern.search(text), f"advisor {command} shows {what}:\n{text}"
        hashes = re.findall(r"\b[0-9a-f]{8,16}\b", text)
        assert all(f"({found[:8]})" in text for found in hashes), f"a hash beside its name:\n{text}"
        assert machine not in text, f"advisor {command}: the whole hash where its name and start do"
    assert len([line for line in shown["models list"].splitlines() if " t4 " in line]) == 10
    assert " t4 " in shown["status --db"] and "held-out MAPE" in shown["status --db"]
    sgd, adamw = (
        _predicted(capsys, [*predict, *db, "--json", *extra]) for extra in ([], ["--optimizer=adamw"])
    )
    # AdamW keeps two moments a parameter, SGD's momentum one: one more 4-byte state for resnet18's 11.7 M
    # parameters is 47 MB; and its update (a GPU's all-tensors path, this machine having measured no Adam
    # step) adds a temporary of all of them, 47 MB more, where momentum SGD updates in place. The peak is
    # the larger of the forward's end and the update, so it moves by at most both and at least the moment
    # (each fitted, a little under a whole byte count).
    parameters = 11_689_512
    assert 0.8 * 4 * parameters <= adamw["peak_memory_bytes"] - sgd["peak_memory_bytes"] <= 2 * 4 * parameters
    assert re.search(r"step\s+│\s+[\d.,]+ (ms|s|µs)\s", shown["predict --model=resnet18"])
    assert re.search(r"job \(p90\)\s+│\s+[\d,]+d \d{2}:\d{2}\s", shown["predict --model=resnet18"])


def test_profile_and_inspect_read_in_units_and_say_as_json(
    trained: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`advisor profile`: times with units and the machine by name (before: ``measured ms 12.34`` and the
    machine's whole hash), its parts as JSON adding up to the step (before: no --json); `advisor inspect`
    takes a token model's --sequence-length and --task, as `advisor predict` does (before: refused)."""
    monkeypatch.setenv("COLUMNS", "200")
    profile = ["profile", "resnet18", "--batch-size=4", "--partition=t4", "--steps=1"]
    profile += ["--db", str(trained / "advisor.db")]
    assert main(profile) == 0
    shown = capsys.readouterr().out
    for what, pattern in UNREADABLE.items():
        assert not pattern.search(shown), f"advisor profile shows {what}:\n{shown}"
    (machine,) = machine_names(Store.existing(trained / "advisor.db").fingerprints())
    assert f"machine t4 ({machine[:8]})" in shown and machine not in shown, shown
    assert re.search(r"step\s+│\s+[\d.,]+ (ms|s|µs)\s+│\s+[\d.,]+ (ms|s|µs)\s+│\s+[\d.]+x\s", shown), shown
    answer = _predicted(capsys, [*profile, "--json"])
    *parts, step = answer["parts"]
    assert step["part"] == "step" and answer["machine_name"] == "t4"
    for side in ("measured_s", "predicted_s"):
        assert step[side] == pytest.approx(sum(part[side] for part in parts))
    gpt2 = ["inspect", "hf:gpt2", "--sequence-length=16", "--task=causal-lm", "--batch-size=2"]
    gpt2 += [f"--model-arg={arg}" for arg in ("n_layer=1", "n_embd=32", "n_head=2", "vocab_size=100")]
    assert main(gpt2) == 0
    shown = capsys.readouterr().out
    assert "hf:gpt2 at 16 tokens (causal-lm), batch 2" in shown and "2x16 -> 2x16x32" in shown, shown
    for what, pattern in UNREADABLE.items():
        assert not pattern.search(shown), f"advisor inspect shows {what}:\n{shown}"
    table = _predicted(capsys, [*gpt2, "--json"])
    assert (table["sequence_length"], table["task"]) == (16, "causal-lm")
