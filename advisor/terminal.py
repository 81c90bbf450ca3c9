"""Tables on a terminal of any width: no word cut short. Rich, squeezed, ends a word with an ellipsis in
one column while sparing the next, or crops the last columns; here the widest columns give way first, none
below its longest word, and a table too wide even so is printed as lines of ``header value`` pairs."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def fit(table: Table, width: int) -> bool:
    """Sets each column's width for ``width`` columns of terminal: the widest give way first, none below its
    longest word; False where even that is too wide."""
    texts = [[str(column.header), *map(str, column.cells)] for column in table.columns]
    natural = [max(len(line) for text in column for line in text.splitlines() or [""]) for column in texts]
    least = [max(len(word) for text in column for word in text.split() or [""]) for column in texts]
    for column, size in zip(table.columns, natural, strict=True):
        column.width = size
    room = width - (_rendered_width(table) - sum(natural))
    widths = list(natural)
    while sum(widths) > room:
        widest = max(range(len(widths)), key=lambda i: widths[i] - least[i])
        if widths[widest] <= least[widest]:
            return False
        widths[widest] -= 1
    for column, size in zip(table.columns, widths, strict=True):
        column.width = size
    return True


def show(table: Table, console: Console) -> None:
    """The table, or where the console is too narrow for it, its title and one line per row."""
    if fit(table, console.width):
        console.print(table)
        return
    if table.title:
        console.print(str(table.title), highlight=False)
    headers = [" ".join(str(column.header).split()) for column in table.columns]
    for row in zip(*(map(str, column.cells) for column in table.columns), strict=True):
        pairs = [f"{header} {' '.join(cell.split())}" for header, cell in zip(headers, row, strict=True)]
        console.print("; ".join(pair.strip() for pair in pairs if pair.strip()), highlight=False)


def _rendered_width(table: Table) -> int:
    """The table's width as rich draws it at its columns' widths: theirs plus padding, edges and rules."""
    from rich.console import Console

    trial = Console(width=10_000, file=io.StringIO(), record=True, color_system=None)
    trial.print(table, crop=False)
    return max(len(line.rstrip()) for line in trial.export_text().splitlines()[1:] or [""])
