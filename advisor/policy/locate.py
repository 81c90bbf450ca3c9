"""Where each key of a TOML text is written, so that a validation error can name its line.

tomllib keeps no positions, so this scans the text itself: ``[table]`` headers and ``key = value`` lines,
dotted and quoted keys included. A key it cannot place (inside an inline table, an array element, a key
that is missing) falls back to its nearest enclosing key, which is on the same line or the table's header.
"""

from __future__ import annotations

import json
import re

_KEY = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_HEADER = re.compile(rf"^\s*\[\[?\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_ASSIGN = re.compile(rf"^\s*({_DOTTED})\s*=")
_PART = re.compile(_KEY)
_MULTILINE = ('"""', "'''")

KeyPath = tuple[str, ...]


def key_lines(text: str) -> dict[KeyPath, int]:
    """The 1-based line where each key path (and each table) is first written."""
    found: dict[KeyPath, int] = {}
    table: KeyPath = ()
    open_string: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if open_string is not None:
            if line.count(open_string) % 2:
                open_string = None
            continue
        if header := _HEADER.match(line):
            table = _split(header[1])
            _record(found, table, number)
        elif assign := _ASSIGN.match(line):
            _record(found, table + _split(assign[1]), number)
        open_string = next((quote for quote in _MULTILINE if line.count(quote) % 2), None)
    return found


def line_of(lines: dict[KeyPath, int], loc: tuple[int | str, ...]) -> int | None:
    """The line of the deepest part of a pydantic error location that the text shows."""
    path = tuple(str(part) for part in loc if part != "[key]")
    for end in range(len(path), 0, -1):
        if (line := lines.get(path[:end])) is not None:
            return line
    return None


def _record(found: dict[KeyPath, int], path: KeyPath, number: int) -> None:
    for end in range(1, len(path) + 1):
        found.setdefault(path[:end], number)


def _split(dotted: str) -> KeyPath:
    return tuple(_unquote(part) for part in _PART.findall(dotted))


def _unquote(part: str) -> str:
    if part.startswith("'"):
        return part[1:-1]
    if part.startswith('"'):
        try:
            return str(json.loads(part))
        except ValueError:  # a TOML escape JSON lacks (\U0001F600); the raw text is close enough
            return part[1:-1]
    return part
