"""Read a policy file and say exactly where it is wrong: every problem carries the line of the offending
key, for TOML syntax errors and for values the model refuses alike."""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from advisor.policy.locate import KeyPath, key_lines, line_of
from advisor.policy.schema import Policy

_TOML_PLACE = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
_TOML_END = " (at end of document)"
_LONG_NUMBER = re.compile(r"[0-9_]{4000,}")
MAX_NESTING = 100
"""A policy needs a few levels; past this many the message says where the nesting ran away."""
_NAMES = {
    "partitions": "a partition name (letters, digits, '_', '.', '-')",
    "accounts": "an account name (lower-case letters, digits, '_', '.', '-'; Slurm lower-cases them)",
    "users": "a user name (letters, digits, '_', '.', '@', '-')",
}


class Problem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

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


class PolicyError(ValueError):
    """A policy that cannot be used; one line per problem, each as ``FILE:LINE: key: what is wrong``."""

    def __init__(self, source: str, problems: Sequence[Problem]) -> None:
        self.source = source
        self.problems = tuple(problems)
        super().__init__("\n".join(problem.describe(source) for problem in self.problems))


def load_policy(path: Path) -> Policy:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PolicyError(str(path), [Problem(line=None, message=f"cannot read: {exc.strerror}")]) from exc
    try:
        text = raw.decode("utf-8-sig")  # an editor's byte-order mark is UTF-8 too
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise PolicyError(str(path), [Problem(line=line, message="not UTF-8 text")]) from exc
    return parse_policy(text, str(path))


def parse_policy(text: str, source: str) -> Policy:
    """``source`` names the text in messages (a path, or ``<stdin>``)."""
    text = text.removeprefix("\ufeff")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(source, [_syntax_problem(str(exc), text)]) from exc
    except RecursionError:
        # tomllib recurses once per nesting level: a hostile or broken file must not take the reader down.
        raise PolicyError(source, [_too_deep(text)]) from None
    except ValueError as exc:  # Python's limit on the digits of an integer (int_max_str_digits)
        line = next((n for n, row in enumerate(text.splitlines(), 1) if _LONG_NUMBER.search(row)), None)
        raise PolicyError(source, [Problem(line=line, message=f"a number too long to read: {exc}")]) from None
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        lines = key_lines(text)
        problems = [_problem(error, lines) for error in exc.errors()]
        problems.sort(key=lambda problem: (problem.line or 0, problem.key))
        raise PolicyError(source, problems) from exc


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


def _problem(error: ErrorDetails, lines: dict[KeyPath, int]) -> Problem:
    loc, message, given = error["loc"], error["msg"], error["input"]
    key = ".".join(str(part) for part in loc if part != "[key]")
    if error["type"] == "string_pattern_mismatch":
        message = f"{given!r} is not {_NAMES[str(loc[0]) if '[key]' in loc else 'partitions']}"
    elif error["type"] == "extra_forbidden":
        message = "unknown key" + _suggestion(loc)
    elif message.startswith("Input should") and isinstance(given, str | int | float | bool):
        message = f"{message}, not {given!r}"
    return Problem(line=line_of(lines, loc), key=key, message=message)


def _suggestion(loc: tuple[int | str, ...]) -> str:
    """The closest key that table takes, else all of them: an unknown key is most often a typo."""
    table = _model_at(tuple(str(part) for part in loc[:-1]))
    if table is None:
        return ""
    known = list(table.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; this table takes: {', '.join(known)}"


def _model_at(path: KeyPath) -> type[BaseModel] | None:
    target: object = Policy
    for part in path:
        if isinstance(target, type) and issubclass(target, BaseModel) and part in target.model_fields:
            target = target.model_fields[part].annotation
        elif get_origin(target) is dict:
            target = get_args(target)[1]
        else:
            return None
    return target if isinstance(target, type) and issubclass(target, BaseModel) else None
