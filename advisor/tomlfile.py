"""TOML files validated by a pydantic model, with every problem placed at its line: the admin's files (the
policy, the settings) all say exactly where they are wrong, for syntax errors and refused values alike.

tomllib keeps no positions, so `key_lines` scans the text itself: ``[table]`` headers and ``key = value``
lines, dotted and quoted keys included. A key it cannot place (inside an inline table, an array element, a
key that is missing) falls back to its nearest enclosing key, which is on the same line or the table's
header.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from advisor.frozen import Frozen

M = TypeVar("M", bound=BaseModel)
Loc = tuple[int | str, ...]
PatternNames = Callable[[Loc], str]
"""What a refused string should have been, said for its place (``"a partition name (...)"``)."""

_KEY = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_HEADER = re.compile(rf"^\s*\[\[?\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_ASSIGN = re.compile(rf"^\s*({_DOTTED})\s*=")
_PART = re.compile(_KEY)
_MULTILINE = ('"""', "'''")
_TOML_PLACE = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
_TOML_END = " (at end of document)"
_LONG_NUMBER = re.compile(r"[0-9_]{4000,}")
MAX_NESTING = 100
"""A file here needs a few levels; past this many the message says where the nesting ran away."""

KeyPath = tuple[str, ...]


class Problem(Frozen):
    line: int | None
    """None only when the problem has no place in the text: an unreadable file."""
    column: int | None = None
    key: str = ""
    message: str

    def describe(self, source: str) -> str:
        place = source if self.line is None else f"{source}:{self.line}"
        if self.column is not None:
            place += f":{self.column}"
        return f"{place}: {self.key}: {self.message}" if self.key else f"{place}: {self.message}"


class TomlFileError(ValueError):
    """A file that cannot be used; one line per problem, each as ``FILE:LINE: key: what is wrong``."""

    def __init__(self, source: str, problems: Sequence[Problem]) -> None:
        self.source = source
        self.problems = tuple(problems)
        super().__init__("\n".join(problem.describe(source) for problem in self.problems))


E = TypeVar("E", bound=TomlFileError)


def load_model(path: Path, model: type[M], error: type[E], names: PatternNames | None = None) -> M:
    """The file at ``path`` as ``model``; every problem raises ``error`` (the caller's own subclass)."""
    text, data = read_toml(path, error)
    return validate(model, data, text, str(path), error, names)


def parse_model(
    text: str, source: str, model: type[M], error: type[E], names: PatternNames | None = None
) -> M:
    """``source`` names the text in messages (a path, or ``<stdin>``)."""
    return validate(model, parse_toml(text, source, error), text, source, error, names)


def read_toml(path: Path, error: type[E]) -> tuple[str, dict[str, Any]]:
    """The file's text and its tables, for a caller that adds to them before `validate`."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise error(str(path), [Problem(line=None, message=f"cannot read: {exc.strerror}")]) from exc
    try:
        text = raw.decode("utf-8-sig")  # an editor's byte-order mark is UTF-8 too
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(str(path), [Problem(line=line, message="not UTF-8 text")]) from exc
    return text, parse_toml(text, str(path), error)


def parse_toml(text: str, source: str, error: type[E]) -> dict[str, Any]:
    text = text.removeprefix("\ufeff")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(source, [_syntax_problem(str(exc), text)]) from exc
    except RecursionError:
        # tomllib recurses once per nesting level: a hostile or broken file must not take the reader down.
        raise error(source, [_too_deep(text)]) from None
    except ValueError as exc:  # Python's limit on the digits of an integer (int_max_str_digits)
        line = next((n for n, row in enumerate(text.splitlines(), 1) if _LONG_NUMBER.search(row)), None)
        raise error(source, [Problem(line=line, message=f"a number too long to read: {exc}")]) from None


def validate(
    model: type[M],
    data: dict[str, Any],
    text: str,
    source: str,
    error: type[E],
    names: PatternNames | None = None,
) -> M:
    """``data`` (read from ``text``) as ``model``; each refused value is placed at its line of ``text``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = key_lines(text.removeprefix("\ufeff"))
        problems = [_problem(model, detail, lines, names) for detail in exc.errors()]
        problems.sort(key=lambda problem: (problem.line or 0, problem.key))
        raise error(source, problems) from exc


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


def line_of(lines: dict[KeyPath, int], loc: Loc) -> int | None:
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


def _too_deep(text: str) -> Problem:
    """The first line where arrays and inline tables open more than MAX_NESTING deep (quotes ignored: a
    rough place is still better than none)."""
    depth = 0
    for number, row in enumerate(text.splitlines(), 1):
        for char in row:
            depth += (char in "[{") - (char in "]}")
            if depth > MAX_NESTING:
                return Problem(line=number, message=f"arrays or tables nested more than {MAX_NESTING} deep")
    return Problem(line=None, message="arrays or tables nested too deep to read")


def _syntax_problem(message: str, text: str) -> Problem:
    if place := _TOML_PLACE.search(message):
        line, column = int(place[1]), int(place[2])
        return Problem(line=line, column=column, message=message[: place.start()])
    if message.endswith(_TOML_END):
        last = max(1, len(text.splitlines()))
        return Problem(line=last, message=message.removesuffix(_TOML_END) + " at the end of the file")
    return Problem(line=None, message=message)


def _problem(
    model: type[BaseModel], error: ErrorDetails, lines: dict[KeyPath, int], names: PatternNames | None
) -> Problem:
    loc, message, given = error["loc"], error["msg"], error["input"]
    key = ".".join(str(part) for part in loc if part != "[key]")
    if error["type"] == "string_pattern_mismatch" and names is not None:
        message = f"{given!r} is not {names(loc)}"
    elif error["type"] == "path_type":  # pydantic names the Python class, which a file's reader never sees
        message = f"Input should be a valid path, not {given!r}"
    elif error["type"] == "extra_forbidden":
        message = "unknown key" + _suggestion(model, loc)
    elif message.startswith("Input should") and isinstance(given, str | int | float | bool):
        message = f"{message}, not {given!r}"
    return Problem(line=line_of(lines, loc), key=key, message=message)


def _suggestion(model: type[BaseModel], loc: Loc) -> str:
    """The closest key that table takes, else all of them: an unknown key is most often a typo."""
    table = _model_at(model, tuple(str(part) for part in loc[:-1]))
    if table is None:
        return ""
    known = list(table.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; this table takes: {', '.join(known)}"


def _model_at(model: type[BaseModel], path: KeyPath) -> type[BaseModel] | None:
    target: object = model
    for part in path:
        if isinstance(target, type) and issubclass(target, BaseModel) and part in target.model_fields:
            target = target.model_fields[part].annotation
        elif get_origin(target) is dict:
            target = get_args(target)[1]
        else:
            return None
    return target if isinstance(target, type) and issubclass(target, BaseModel) else None
