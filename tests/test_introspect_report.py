"""``advisor inspect`` output: a rich table for people, the layer table's JSON for programs.

The command runs in this process (`advisor.cli.main`, as its entry point calls it): torch is loaded once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from advisor import cli
from advisor.introspect import LayerTable

FACTORY = "tests.factories.cnn:build"


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


Inspect = Callable[..., Result]


@pytest.fixture
def inspect(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Inspect:
    monkeypatch.setenv("COLUMNS", "250")

    def run(model: str, *args: str) -> Result:
        argv = ["inspect", model, "--input-shape", "3,32,32", "--batch-size", "4", *args]
        try:
            returncode = cli.main(argv)
        except SystemExit as exit:  # argparse refusing the command line
            returncode = int(exit.code or 0)
        out, err = capsys.readouterr()
        return Result(returncode, out, err)

    return run


def test_rendered_table(inspect: Inspect) -> None:
    result = inspect(FACTORY)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "features.3" in text
    assert "conv (depthwise)" in text
    assert "4x3x32x32 -> 4x8x32x32" in text
    assert "k3 s1 p1" in text
    for line in (
        "FLOPs per training step",
        "optimizer state, adamw",
        "estimated peak training memory",
        "bf16",
    ):
        assert line in text


def test_json_is_the_layer_table(inspect: Inspect) -> None:
    result = inspect(FACTORY, "--json")
    assert result.returncode == 0, result.stderr
    assert LayerTable.model_validate_json(result.stdout).reference == FACTORY


def test_error_is_one_line_on_stderr_and_status_1(inspect: Inspect) -> None:
    result = inspect("tests.factories.cnn:broken")
    assert result.returncode == 1
    assert result.stdout == ""
    reason = "RuntimeError: cannot build a network 8 wide"
    assert result.stderr == f"advisor: error: building 'tests.factories.cnn:broken' failed: {reason}\n"


def test_a_bad_shape_is_refused_by_the_command_line(inspect: Inspect) -> None:
    result = inspect("resnet18", "--input-shape", "3,224")
    assert result.returncode == 2
    assert "expected C,H,W" in result.stderr
