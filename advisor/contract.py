"""The environment contract between the advisor's rewrite and the training job (`advisor.runtime`).

A job that follows the advice reads these variables; a job that ignores them runs as the user wrote it.
"""

from __future__ import annotations

MICRO_BATCH = "ADVISOR_MICRO_BATCH"
GRAD_ACCUM = "ADVISOR_GRAD_ACCUM"
GLOBAL_BATCH = "ADVISOR_GLOBAL_BATCH"
AMP = "ADVISOR_AMP"
"""One of `off`, `bf16`, `fp16`."""
CHANNELS_LAST = "ADVISOR_CHANNELS_LAST"
"""`1` or `0`."""
