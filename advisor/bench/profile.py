"""A real training step of one model, profiled on this machine: where its time goes, in the step model's
parts (`StepPart`), for `advisor profile`.

Each part as what prices it measures it: the optimizer is ``Optimizer.step``'s own wall time, timed
unprofiled (the swept update is the same call, its Python loop over the tensors included); convolutions and
matrix products (the layers the benchmarks time) and every other aten op (norms, activations, pooling,
element-wise, copies: memory-bound) are torch.profiler's self CPU time by the op registry's families
(`advisor.ops.profiled_op`); what no op accounts for (autograd's engine, Python, the loader's collation,
``zero_grad``) is per-op dispatch: the unprofiled steps' wall time less the others, so the profiler's own
cost per event (thousands a step) does not land there.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable
from statistics import median
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from advisor.bench.training import Training, run_delay_s, start_training
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


def kernel_parts(events: Iterable[Any], steps: int) -> dict[StepPart, float]:
    """Seconds per step of the layers' and the memory-bound ops' kernels: aten ops' self time outside the
    optimizer, by part."""
    parts = {StepPart.LAYERS: 0.0, StepPart.MEMORY_BOUND: 0.0}
    for event in events:
        part = op_part(event.name)
        if part in parts and not _in_optimizer(event):
            parts[part] += event.self_cpu_time_total / 1e6 / steps
    return parts


def split_step(wall_s: float, optimizer_s: float, kernels: dict[StepPart, float]) -> dict[StepPart, float]:
    """A step's wall time in parts: the optimizer's own time, the kernels', and per-op dispatch the rest
    (none where the profiled kernels took longer than the step left them)."""
    parts = dict.fromkeys(StepPart, 0.0)
    parts.update(kernels)
    parts[StepPart.OPTIMIZER] = optimizer_s
    parts[StepPart.DISPATCH] = max(wall_s - optimizer_s - sum(kernels.values()), 0.0)
    return parts


_DISTURBED = 0.05
"""A round whose timed or profiled step waited this share of its time for the CPU is taken again."""
_RETRIES = 3
"""At most this many times the rounds wanted are run."""


def _own_time(training: Training) -> tuple[float, float, bool]:
    """One step's seconds less what it waited for the CPU, its ``Optimizer.step``'s seconds, and whether
    it waited over `_DISTURBED` of its time."""
    began: list[float] = []
    spent: list[float] = []

    def ended(*_: object) -> None:
        """The outermost call's time: a subclass's step calling its base's runs the hooks twice."""
        start = began.pop()
        if not began:
            spent.append(time.perf_counter() - start)

    before = training.optimizer.register_step_pre_hook(lambda *_: began.append(time.perf_counter()))
    after = training.optimizer.register_step_post_hook(ended)
    try:
        waited, start = run_delay_s(), time.perf_counter()
        training.compute(*training.fetch())
        wall, waited = time.perf_counter() - start, run_delay_s() - waited
    finally:
        before.remove()
        after.remove()
    return wall - waited, sum(spent), waited > _DISTURBED * wall


def profile_step(
    config: StepConfig, device: torch.device, steps: int = 5, *, allow_factories: bool = False
) -> dict[StepPart, float]:
    """Seconds per step of each part (`split_step`), each part's median over ``steps`` rounds after two
    untimed steps. A round is a step timed unprofiled, one under the starting profiler and one profiled:
    timed and profiled steps interleaved, so a slow spell of a shared CPU touches both alike; a round
    either of whose steps waited for the CPU is run again, up to `_RETRIES` times the rounds."""
    warmup = 2
    training = start_training(config, device, warmup + 3 * steps * _RETRIES, allow_factories=allow_factories)
    for _ in range(warmup):
        training.compute(*training.fetch())
    kernels: list[dict[StepPart, float]] = []
    rounds: list[tuple[float, float, bool]] = []
    with (
        warnings.catch_warnings(),
        profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=1),
            on_trace_ready=lambda done: kernels.append(kernel_parts(done.events(), 1)),
        ) as profiled,
    ):
        warnings.filterwarnings("ignore", "Warning: Profiler clears events")  # each round read as it ends
        while len(rounds) < steps * _RETRIES and sum(not r[2] for r in rounds) < steps:
            wall, optimizer, disturbed = _own_time(training)
            profiled.step()
            training.compute(*training.fetch())
            profiled.step()
            waited = run_delay_s()
            start = time.perf_counter()
            training.compute(*training.fetch())
            disturbed |= run_delay_s() - waited > _DISTURBED * (time.perf_counter() - start)
            profiled.step()
            rounds.append((wall, optimizer, disturbed))
    taken = list(zip(rounds, kernels, strict=True))
    kept = [(r, k) for r, k in taken if not r[2]] or taken
    split = [split_step(wall, optimizer, k) for (wall, optimizer, _), k in kept]
    return {part: median(s[part] for s in split) for part in StepPart}
