"""Slurm's value syntaxes: durations, memory sizes, TRES and gres strings. Pure text in, values out."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from advisor import readable
from advisor.slurm.models import Gpus

UNSET_WORDS = frozenset({"UNLIMITED", "INFINITE", "NONE", "N/A"})
_DURATION = re.compile(r"(?:(?P<days>\d+)-)?(?P<clock>\d+(?::\d+){0,2})")
_MEMORY = re.compile(r"(?P<value>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)B?", re.IGNORECASE)
_HOSTLIST_BRACKETS = re.compile(r"\[([^\]]*)\]")
_MEMORY_FACTOR = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}


def expand_hostlist(text: str) -> list[str]:
    """``a100-[1-3,5],t4-1`` or ``r[1-2]-n[01-02]`` as names, in Slurm's order: any number of brackets per
    name (the first varies slowest), zero-padded ranges kept as written, spaces ignored."""
    names: list[str] = []
    depth, start = 0, 0
    flat = "".join(text.split())
    for index, char in enumerate(flat + ","):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            if flat[start:index]:
                names.extend(_expand_one(flat[start:index]))
            start = index + 1
    return names


def _expand_one(pattern: str) -> list[str]:
    match = _HOSTLIST_BRACKETS.search(pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    names: list[str] = []
    for part in match[1].split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"not a hostlist range: {part!r} in {pattern!r}")
        for number in range(int(low), int(high or low) + 1):
            names.extend(_expand_one(f"{head}{number:0{len(low)}d}{tail}"))
    return names


def parse_duration(text: str) -> timedelta | None:
    """Parse any Slurm time-limit string; None stands for both "unlimited" and "not set"."""
    stripped = text.strip()
    if stripped.upper() in UNSET_WORDS:
        return None
    match = _DURATION.fullmatch(stripped)
    if match is None:
        raise ValueError(f"not a Slurm duration: {text!r}")
    fields = [int(part) for part in match["clock"].split(":")]
    if match["days"] is not None:
        hours, minutes, seconds = [*fields, 0, 0][:3]
        return timedelta(days=int(match["days"]), hours=hours, minutes=minutes, seconds=seconds)
    if len(fields) == 1:
        return timedelta(minutes=fields[0])
    if len(fields) == 2:
        return timedelta(minutes=fields[0], seconds=fields[1])
    return timedelta(hours=fields[0], minutes=fields[1], seconds=fields[2])


def format_seconds(seconds: float) -> str:
    """A span of seconds as a person reads it, to the nearest second: ``HH:MM:SS``, ``Xd HH:MM`` beyond a
    day (Slurm's ``1970-03:40:31`` reads as a date), `readable.duration`."""
    return readable.duration(seconds)


def format_duration(limit: timedelta | None) -> str:
    """Render a limit for ``--time``; partial seconds round up so a job is never cut short."""
    if limit is None:
        return "UNLIMITED"
    if limit < timedelta(0):
        raise ValueError(f"negative duration: {limit}")
    days, rest = divmod(math.ceil(limit.total_seconds()), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    return f"{days}-{clock}" if days else clock


def parse_memory_mb(text: str) -> int:
    """Memory in MB (Slurm's default unit), rounded up so a small non-zero amount never reads as 0."""
    match = _MEMORY.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a Slurm memory size: {text!r}")
    megabytes = float(match["value"]) * _MEMORY_FACTOR[match["unit"].upper() or "M"]
    return math.ceil(round(megabytes, 6))


def parse_tres(text: str) -> dict[str, str]:
    """Split ``cpu=1,mem=100M,gres/gpu:a100=2`` into a dict; values stay raw strings."""
    stripped = text.strip()
    if stripped in {"", "(null)", "N/A"}:
        return {}
    tres: dict[str, str] = {}
    for item in stripped.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"not a TRES list (bad item {item!r}): {text!r}")
        tres[key.strip()] = value.strip()
    return tres


def parse_gres(text: str) -> Gpus | None:
    """Total the GPUs of a gres list in any of Slurm's spellings, ignoring other gres such as shards."""
    counts: list[int] = []
    types: set[str] = set()
    for item in split_outside_parens(text):
        spec = item.split("(", 1)[0].strip()
        if spec.startswith(("gres:", "gres/")):
            spec = spec[len("gres:") :]
        parts = spec.replace("=", ":").split(":")
        if parts[0] != "gpu":
            continue
        try:
            if len(parts) == 1:
                counts.append(1)
            elif len(parts) == 2 and parts[1].isdigit():
                counts.append(int(parts[1]))
            elif len(parts) == 2:
                types.add(parts[1])
                counts.append(1)
            elif len(parts) == 3:
                types.add(parts[1])
                counts.append(int(parts[2]))
            else:
                raise ValueError("too many fields")
        except ValueError as error:
            raise ValueError(f"not a gres specification ({error}): {item!r} in {text!r}") from None
    if not counts:
        return None
    return Gpus(type=types.pop() if len(types) == 1 else None, count=sum(counts))


def split_outside_parens(text: str) -> list[str]:
    """Split at commas, except inside ``(IDX:0,2)``-style suffixes."""
    items: list[str] = []
    depth, start = 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip() and item.strip() not in {"(null)", "N/A"}]
