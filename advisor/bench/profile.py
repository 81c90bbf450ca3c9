"""A real training step of one model, profiled on this machine: where its time goes, in the step model's
parts (`StepPart`), for `advisor profile`.

torch.profiler's self CPU time per aten op, by the op registry's families (`advisor.ops.profiled_op`):
convolutions and matrix products are the layers the benchmarks time; the optimizer's update is every op
under ``Optimizer.step`` and every update kernel; every other aten op (norms,
activations, pooling, element-wise, copies) is memory-bound; what no op accounts for (autograd's engine,
dispatch, Python, the loader's collation) counts as per-op dispatch: the unprofiled step's wall time less
the kernels' self time, so the profiler's own cost per event does not (what the profiler adds inside the
kernels' self time still does).
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from advisor.bench.training import start_training
from advisor.ops import profiled_op
from advisor.ops.op import Family
from advisor.records import StepConfig, StepPart

_PARTS: dict[Family, StepPart] = {
    "convolution": StepPart.LAYERS,
    "matrix": StepPart.LAYERS,
    "update": StepPart.OPTIMIZER,
}


def op_part(name: str) -> StepPart | None:
    """The part an aten op's self time belongs to, by its op's family in the registry (`profiled_op`);
    memory-bound for every other aten op; None for what is not an aten op (wrappers, engine)."""
    if not name.startswith("aten::"):
        return None
    op = profiled_op(name)
    return _PARTS.get(op.family, StepPart.MEMORY_BOUND) if op is not None else StepPart.MEMORY_BOUND


def _in_optimizer(event: Any) -> bool:
    """Inside ``Optimizer.step`` (on a CPU, SGD updates with plain element-wise ops, not ``_foreach``)."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("Optimizer.step"):
            return True
        parent = parent.cpu_parent
    return False


def profile_step(
    config: StepConfig, device: torch.device, steps: int = 5, *, allow_factories: bool = False
) -> dict[StepPart, float]:
    """Seconds per step of each part, over ``steps`` profiled steps after two untimed ones. Per-op dispatch
    is what the same number of steps take unprofiled, just before, less the kernels' self time: the
    profiler's own cost per event (thousands a step) would otherwise land there."""
    warmup = 2
    training = start_training(config, device, warmup + 2 * steps, allow_factories=allow_factories)
    for _ in range(warmup):
        training.compute(*training.fetch())
    began = time.perf_counter()
    for _ in range(steps):
        training.compute(*training.fetch())
    wall = (time.perf_counter() - began) / steps
    with profile(activities=[ProfilerActivity.CPU]) as profiled:
        for _ in range(steps):
            training.compute(*training.fetch())
    parts = dict.fromkeys(StepPart, 0.0)
    for event in profiled.events():
        part = op_part(event.name)
        if part is not None:
            part = StepPart.OPTIMIZER if _in_optimizer(event) else part
            parts[part] += event.self_cpu_time_total / 1e6 / steps
    parts[StepPart.DISPATCH] = max(wall - sum(parts.values()), 0.0)
    return parts
