"""Option values checked the way sbatch 22.05 checks them before anything reaches the controller.

Each reason is sbatch's own message. Checks that need the cluster (gres names, partition names) stay
with the controller.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import timedelta

from advisor.jobscript.errors import ScriptError
from advisor.slurm.values import parse_duration, parse_memory_mb

_TIME_CHARS = re.compile(r"[\d:-]+")
_INFINITE = frozenset({"-1", "INFINITE", "UNLIMITED"})
_MEMORY = re.compile(r"\d+(?:[KMGT]B?)?", re.IGNORECASE)
_INT = re.compile(r"[+-]?\d+")
_INT_MAX = 2**31 - 1
_NODES = re.compile(r"(\d+)([km]?)(?:-(\d*)([km]?))?", re.IGNORECASE)
_SUFFIX = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_COUNT = re.compile(r"(\d+)([kmg]?)", re.IGNORECASE)
_GRES_NAME = re.compile(r"[\w.-]+")
_GRES = "Invalid generic resource (gres) specification"


@dataclass(frozen=True)
class GpuItem:
    count: int
    type: str | None


def time_minutes(value: str, option: str, where: str) -> timedelta | None:
    """A limit as sbatch sends it: whole minutes, seconds rounded up; None for unlimited.

    Negative limits other than -1 pass sbatch and wrap around in the controller; they are refused here.
    """
    if value.upper() in _INFINITE:
        return None
    limit = None
    if _TIME_CHARS.fullmatch(value):
        try:
            # "2-" (days, nothing after the dash) is accepted by Slurm's time parser.
            limit = parse_duration(f"{value}0" if value.endswith("-") else value)
        except ValueError:
            limit = None
    if limit is None:
        raise ScriptError(where, f"Invalid --{option} specification")
    return timedelta(minutes=math.ceil(limit.total_seconds() / 60))


def memory_mb(value: str, option: str, where: str) -> int:
    if not _MEMORY.fullmatch(value):
        raise ScriptError(where, f"Invalid --{option} specification")
    return parse_memory_mb(value.upper().removesuffix("B"))


def positive_int(value: str, option: str, where: str) -> int:
    if not _INT.fullmatch(value.lstrip(" \t\n\v\f\r")) or not 0 < int(value) <= _INT_MAX:
        raise ScriptError(where, f'Invalid numeric value "{value}" for --{option}.')
    return int(value)


def node_range(value: str, option: str, where: str) -> tuple[int, int]:
    """``N`` (meaning exactly N), ``MIN-MAX``, with sbatch's k/m multipliers; ``option`` is --nodes."""
    match = _NODES.fullmatch(value)
    if match is None:
        raise ScriptError(where, f'"{value}" is not a valid node count')
    low = int(match[1]) * _SUFFIX[match[2].lower()]
    if match[3] is None:
        return low, low
    high = int(match[3]) * _SUFFIX[match[4].lower()] if match[3] else -1
    if high < low:
        raise ScriptError(where, f"Maximum node count {high} is less than minimum node count {low}")
    return low, high


def gres_gpus(value: str, where: str) -> list[GpuItem]:
    """The GPU entries of a ``--gres`` list (``[gres:]gpu[:type][:count]``, ``gpu:type=count``)."""
    if value.lower() == "none":
        return []
    items: list[GpuItem] = []
    for item in value.split(","):
        name, _, spec = item.removeprefix("gres:").partition(":")
        if not _GRES_NAME.fullmatch(name):
            raise ScriptError(where, _GRES)
        gpu = _typed_count(spec, where) if spec else GpuItem(count=1, type=None)
        if name == "gpu":
            items.append(gpu)
    return items


def gpus(value: str, where: str) -> list[GpuItem]:
    """``--gpus*`` lists: ``[type:]count`` or a bare type (one GPU of it)."""
    return [_typed_count(item, where) for item in value.split(",")]


def _typed_count(spec: str, where: str) -> GpuItem:
    parts = spec.split(":")
    if len(parts) == 1:
        head, equals, count = parts[0].partition("=")
        if not head:
            raise ScriptError(where, _GRES)
        if equals:
            return GpuItem(count=_count(count, where), type=head)
        if _COUNT.fullmatch(head):
            return GpuItem(count=_count(head, where), type=None)
        return GpuItem(count=1, type=head)
    if len(parts) == 2 and parts[0] and "=" not in parts[0]:
        return GpuItem(count=_count(parts[1], where), type=parts[0])
    raise ScriptError(where, _GRES)


def _count(text: str, where: str) -> int:
    match = _COUNT.fullmatch(text)
    if match is None:
        raise ScriptError(where, _GRES)
    return int(match[1]) * _SUFFIX[match[2].lower()]


#: Optional arguments whose words sbatch checks itself (case-insensitively).
CHOICES = {
    "exclusive": frozenset({"exclusive", "oversubscribe", "user", "mcs"}),
    "no-kill": frozenset({"set", "off", "no"}),
}


def choice(value: str, option: str, where: str) -> str:
    """An empty word (``SBATCH_EXCLUSIVE=``) means the bare option, as for sbatch."""
    if value and value.lower() not in CHOICES[option]:
        raise ScriptError(where, f"Invalid --{option} specification")
    return value
