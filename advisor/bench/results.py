"""Benchmark results as JSON lines: written by a job on a compute node, read back on the login node.

A night's job can be killed by its time limit or a node failure at any moment: every finished
measurement is already on disk by then (one fsynced line each), and the reader drops a torn last line.
No torch here: the login node reads results without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from advisor.records import ResultLine

Sink = Callable[[ResultLine], None]


def jsonl_sink(path: Path) -> Callable[[BaseModel], None]:
    """Appends each line and fsyncs it, so a killed job keeps everything it measured (a benchmark's
    results, the communication benchmark's)."""
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(line: BaseModel) -> None:
        with path.open("a", encoding="utf-8") as file:
            file.write(line.model_dump_json() + "\n")
            file.flush()
            os.fsync(file.fileno())

    return write


def complete_lines(path: Path) -> list[str]:
    """Every complete line of a JSON-lines file; a last line without its newline was torn by a dying
    writer and is dropped."""
    *complete, _torn = path.read_text(encoding="utf-8").split("\n")
    return complete


def read_jsonl(path: Path) -> list[ResultLine]:
    """Every complete line (`complete_lines`) as a benchmark result."""
    return parse_results(path, complete_lines(path))


def parse_results(path: Path, texts: list[str], after: int = 0) -> list[ResultLine]:
    """The complete lines ``texts`` of ``path`` but its first ``after`` as benchmark results: a reader
    that follows a growing file parses each line once."""
    lines = []
    for number, text in enumerate(texts[after:], start=after + 1):
        if text.strip():
            try:
                lines.append(ResultLine.model_validate_json(text))
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not a benchmark result: {error}") from error
    return lines
