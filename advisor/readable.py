"""Values as people read them: one place for durations, short times, sizes, shares, costs, timestamps and
headers, so every command and page says the same thing the same way (the standard library only: the
filter's helper and a base install import it too)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from enum import Enum

NONE = "-"
"""What an absent value reads as."""
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_WORDS = {
    "mape": "MAPE",
    "heldout": "held-out",
    "gpu": "GPU",
    "gpus": "GPUs",
    "cpu": "CPU",
    "cpus": "CPUs",
    "p10": "p10",
    "p50": "p50",
    "p90": "p90",
    "id": "ID",
    "amp": "AMP",
}
_HEADERS = {
    "step_s": "step",
    "step_p90_s": "step (p90)",
    "step_p10_s": "step (p10)",
    "memory_bytes": "device memory",
    "job_s": "job",
    "job_p90_s": "job (p90)",
    "created_at": "trained",
    "age_hours": "age",
    "step_rows": "steps",
    "layer_rows": "layers",
    "peak_memory_bytes": "peak memory",
    "gpus_used": "GPUs in use",
    "mem_mb": "memory per node (--mem)",
    "mem_per_cpu_mb": "memory per CPU",
    "mem_per_gpu_mb": "memory per GPU",
}
_FLOAT_DIGITS = 3


def duration(seconds: float | timedelta | None) -> str:
    """A span to the nearest second: ``HH:MM:SS`` within a day, ``Xd HH:MM`` beyond (``1-03:40:31``, Slurm's
    own form, reads as a date once the days reach four digits)."""
    if seconds is None:
        return NONE
    total = seconds.total_seconds() if isinstance(seconds, timedelta) else seconds
    if math.isnan(total):
        return NONE
    if math.isinf(total):
        return "never" if total > 0 else NONE
    sign, whole = ("-" if total < 0 else ""), round(abs(total))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days:,}d {hours:02d}:{minutes:02d}"
    return f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"


def short_time(seconds: float | None) -> str:
    """A step's time: ``0.70 ms``, ``1.25 s``; a minute or more reads as a `duration`."""
    if seconds is None:
        return NONE
    if abs(seconds) < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if abs(seconds) < 1:
        return f"{seconds * 1e3:.3g} ms"
    if abs(seconds) < 60:
        return f"{seconds:.3g} s"
    return duration(seconds)


def size(count: float | None) -> str:
    """Bytes in binary units: ``143 MiB``, ``1.5 GiB``, three significant digits."""
    if count is None:
        return NONE
    value, unit = float(count), 0
    while abs(value) >= 1024 and unit < len(_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    if unit == 0:
        return f"{int(value)} B"
    return f"{_significant(value)} {_UNITS[unit]}"


def size_mb(megabytes: float | None) -> str:
    """Slurm's and the GPU's megabytes (MiB) as a `size`."""
    return NONE if megabytes is None else size(megabytes * 2**20)


def percent(share: float | None) -> str:
    """A fraction as a percentage with one decimal: ``36.5%``."""
    return NONE if share is None else f"{share:.1%}"


def ratio(value: float | None) -> str:
    """A factor such as p90/p50: two decimals, so a 1.62 beside a 1.6 cut is not read as 1.6."""
    return NONE if value is None else f"{value:.2f}x"


def cost(value: float | None, unit: str) -> str:
    """An amount in the policy's unit: ``12.34 credits``."""
    return NONE if value is None else f"{value:,.2f} {unit}"


def timestamp(when: datetime | str | None) -> str:
    """To the minute, in UTC, with its zone: ``2026-12-04 23:06 UTC`` (ISO text is read first)."""
    if when is None or when == "":
        return NONE
    moment = datetime.fromisoformat(when) if isinstance(when, str) else when
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M") + (" UTC" if moment.tzinfo is not None else "")


def header(name: str) -> str:
    """A field's name in words: ``heldout_mape`` -> ``held-out MAPE``, ``gpus_used`` -> ``GPUs in use``."""
    if name in _HEADERS:
        return _HEADERS[name]
    words = re.sub(r"_s$", "", name).split("_")
    return " ".join(_WORDS.get(word, word) for word in words)


def value(item: object) -> str:
    """Any field's value as a cell: no ``None``/``True``, no float's 16 digits, no repr of a list or enum."""
    if item is None or item == [] or item == {}:
        return NONE
    if isinstance(item, bool):
        return "yes" if item else "no"
    if isinstance(item, Enum):
        return value(item.value)
    if isinstance(item, float):
        return _significant(item)
    if isinstance(item, datetime):
        return timestamp(item)
    if isinstance(item, date):
        return item.isoformat()
    if isinstance(item, timedelta):
        return duration(item)
    if isinstance(item, Mapping):
        return ", ".join(f"{key}={value(inner)}" for key, inner in item.items())
    if isinstance(item, list | tuple | set | frozenset):
        return ", ".join(value(inner) for inner in item)
    return str(item)


def field(name: str, item: object) -> str:
    """A named field's value, its unit read off its name (``*_bytes`` a size, ``*_s`` a time, ``*_mape``
    and ``*_share`` a percentage, ``*_at`` a timestamp)."""
    if isinstance(item, int | float) and not isinstance(item, bool):
        if name.endswith("_bytes"):
            return size(item)
        if name.endswith("_mb"):
            return size_mb(item)
        if name.endswith("_s"):
            return short_time(item)
        if name.endswith(("mape", "_share", "_fraction")):
            return percent(item)
        if name.endswith("_hours"):
            return duration(item * 3600)
    if name.endswith("_at") and isinstance(item, str | datetime):
        return timestamp(item)
    return value(item)


def _significant(number: float) -> str:
    """Three significant digits, without an exponent for everyday magnitudes, nor zeros that say nothing (3
    epochs, not 3.00)."""
    if number == 0 or not math.isfinite(number):
        return f"{number:g}"
    digits = max(0, _FLOAT_DIGITS - 1 - math.floor(math.log10(abs(number))))
    text = f"{number:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
