"""Estimates for a partition nobody benchmarked, scaled from one that was: a roofline ratio of two devices.

A step costs ``max(FLOPs / peak FLOP/s, bytes / bandwidth)`` on each device in the roofline model; the
ratio of the two is applied to the benchmarked machine's prediction. Crude, hence ``confidence: low``.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

ASSUMED_CPU_FLOPS = 5e9
"""The bench planner's assumed CPU throughput (``advisor.bench.plan``): a CPU has no specification file."""


class DeviceSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    flops: float = Field(gt=0)
    """FP32 FLOP/s."""
    bandwidth: float | None = Field(default=None, gt=0)
    """Memory bytes/s; None where unknown (then only FLOP/s are compared)."""
    memory_bytes: int | None = None


def _normal(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def match_spec(name: str, specs: list[DeviceSpec]) -> DeviceSpec | None:
    """The specification whose device name contains ``name`` (a partition or GPU type such as ``t4``);
    among several (A100 variants) the first by name, so the choice is stable."""
    wanted = _normal(name)
    if not wanted:
        return None
    found = sorted((s for s in specs if wanted in _normal(s.name)), key=lambda s: s.name)
    return found[0] if found else None


def roofline_ratio(flops: float, bytes_moved: float, base: DeviceSpec, target: DeviceSpec) -> float:
    """Target time over base time for one step of ``flops`` and ``bytes_moved``."""

    def seconds(device: DeviceSpec) -> float:
        compute = flops / device.flops
        if device.bandwidth is None or base.bandwidth is None or target.bandwidth is None:
            return compute
        return max(compute, bytes_moved / device.bandwidth)

    return seconds(target) / seconds(base)
