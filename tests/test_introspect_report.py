"""``advisor inspect`` output: a rich table for people, the layer table's JSON for programs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from advisor.introspect import LayerTable

FACTORY = "tests.factories.cnn:build"
REPO = Path(__file__).resolve().parent.parent
ADVISOR = str(Path(sys.executable).parent / "advisor")


def inspect(model: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ADVISOR, "inspect", model, "--input-shape", "3,32,32", "--batch-size", "4", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
        env={"COLUMNS": "250", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )


def test_rendered_table() -> None:
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


def test_json_is_the_layer_table() -> None:
    result = inspect(FACTORY, "--json")
    assert result.returncode == 0, result.stderr
    assert LayerTable.model_validate_json(result.stdout).reference == FACTORY


def test_error_is_one_line_on_stderr_and_status_1() -> None:
    result = inspect("tests.factories.cnn:broken")
    assert result.returncode == 1
    assert result.stdout == ""
    reason = "RuntimeError: cannot build a network 8 wide"
    assert result.stderr == f"advisor: error: building 'tests.factories.cnn:broken' failed: {reason}\n"


def test_a_bad_shape_is_refused_by_the_command_line() -> None:
    result = inspect("resnet18", "--input-shape", "3,224")
    assert result.returncode == 2
    assert "expected C,H,W" in result.stderr
