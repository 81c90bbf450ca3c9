"""The environment contract between the advisor's rewrite and the training job (`advisor.runtime`).

A job that follows the advice reads these variables; a job that ignores them runs as the user wrote it.
The grammar of each value and the batch-flag pattern live here too: the daemon writes by them and
`advise-submit` checks what it is sent against them (standard library only: the wrapper imports this).
"""

from __future__ import annotations

import re

MICRO_BATCH = "ADVISOR_MICRO_BATCH"
GRAD_ACCUM = "ADVISOR_GRAD_ACCUM"
GLOBAL_BATCH = "ADVISOR_GLOBAL_BATCH"
AMP = "ADVISOR_AMP"
"""One of `off`, `bf16`, `fp16`."""
CHANNELS_LAST = "ADVISOR_CHANNELS_LAST"
"""`1` or `0`."""

MAX_BATCH = 2**31
"""The largest global batch, micro-batch or accumulation count a description or an advice may carry."""
_COUNT = re.compile(r"[1-9][0-9]{0,9}")
VALUES: dict[str, re.Pattern[str]] = {
    MICRO_BATCH: _COUNT,
    GRAD_ACCUM: _COUNT,
    GLOBAL_BATCH: _COUNT,
    AMP: re.compile(r"off|bf16|fp16"),
    CHANNELS_LAST: re.compile(r"[01]"),
}
"""Every variable a rewrite may set, and the whole of what its value may be."""


def valid_value(name: str, value: str) -> bool:
    pattern = VALUES.get(name)
    if pattern is None or not pattern.fullmatch(value):
        return False
    return pattern is not _COUNT or int(value) <= MAX_BATCH


def batch_flag_pattern(flag: str) -> re.Pattern[str]:
    """Where a script body passes the micro-batch with ``flag``; group 1 is the value as written."""
    return re.compile(rf"(?<![\w-]){re.escape(flag)}(?:=|[ \t]+)(\S+)")
