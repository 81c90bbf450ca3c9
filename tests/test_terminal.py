"""Tables on terminals of any width (`advisor.terminal`): no word cut, no column cropped."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.table import Table

from advisor import terminal

HEADERS = ("partition", "finished", "not comparable", "completed", "timed out", "MAPE", "after calibration")
ROW = ("a100", "12", "3", "9", "0", "36.5%", "12.0%")


def table() -> Table:
    made = Table(title="advised jobs")
    for header in (*HEADERS, "actual / predicted", "under p90"):
        made.add_column(header)
    made.add_row(*ROW, "1.62", "62% of 13 (90% expected)")
    return made


@pytest.mark.parametrize("width", [130, 120, 110])
def test_a_table_narrower_than_its_words_folds_between_words_and_keeps_every_column(width: int) -> None:
    """Rich alone, at 120 columns, cut 'partition' to 'partiti…' and dropped the last column's end."""
    console = Console(width=width, record=True, color_system=None)
    terminal.show(table(), console)
    text = console.export_text()
    assert "…" not in text and all(len(line.rstrip()) <= width for line in text.splitlines())
    words = {
        word
        for cell in (*HEADERS, *ROW, "actual / predicted", "62% of 13 (90% expected)")
        for word in cell.split()
    }
    shown = {word.strip(";") for word in text.split()}
    assert words <= shown, words - shown
    assert "┃" in text, "still a table"


def test_a_terminal_too_narrow_for_the_words_gets_one_line_per_row() -> None:
    console = Console(width=60, record=True, color_system=None)
    terminal.show(table(), console)
    text = " ".join(console.export_text().split())
    assert text.startswith("advised jobs partition a100; finished 12; not comparable 3;")
    assert "under p90 62% of 13 (90% expected)" in text and "┃" not in text
