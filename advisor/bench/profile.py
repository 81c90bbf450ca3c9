"""A real training step of one model, profiled on this machine: where its time goes, in the step model's
parts (`StepPart`), for `advisor profile`.

Each part as what prices it measures it: the optimizer is ``Optimizer.step``'s own wall time, timed
unprofiled (the swept update is the same call, its Python loop over the tensors included); convolutions and
matrix products (the layers the benchmarks time) and every other aten op (norms, activations, pooling,
element-wise, copies: memory-bound) are torch.profiler's self CPU time by the op registry's families
(`advisor.ops.profiled_op`), but an op that moves no byte (a view, an allocation: `METADATA`) is dispatch, as
no bandwidth prices it; what no op accounts for (autograd's engine, Python, the loader's collation,
``zero_grad``) is per-op dispatch: the unprofiled steps' wall time less the others, so the profiler's own
cost per event (thousands a step) does not land there; what it adds inside the kernels' self time lands
in them in some profiled runs and not in others. Steps that waited for a shared CPU are taken again.

Rounds alternate unprofiled steps and a profiled run, and every part is its least over the rounds, the
unprofiled time as much as the kernels: a shared CPU's slow spells and the profiler's cost only add, and a
median step beside the least kernels put the host's usual slowness into dispatch, in proportion to the
kernels (resnet18 at batch 32: 12.0 ms against 3.0 ms at the least of both, 3.9 ms at batch 2:
benchmarks/README.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from advisor.bench.measure import DISTURBED_SHARE, RETIMES, timing_more
from advisor.bench.training import Training, run_delay_s, start_training
from advisor.ops import profiled_op
from advisor.ops.op import Family
from advisor.records import StepConfig, StepPart

_PARTS: dict[Family, StepPart] = {
    "convolution": StepPart.LAYERS,
    "matrix": StepPart.LAYERS,
    "update": StepPart.OPTIMIZER,
}
METADATA = frozenset(
    f"aten::{name}"
    for name in (
        "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "alias", "detach", "detach_", "t",
        "transpose", "permute", "expand", "squeeze", "unsqueeze", "select", "slice", "narrow", "flatten",
        "unflatten", "split", "chunk", "empty", "empty_like", "empty_strided", "resize_", "result_type",
        "lift_fresh", "to", "contiguous",
    )
)  # fmt: skip
"""Aten ops whose own time moves no byte: views, allocations, and wrappers whose copy (if any) is an op of its
own (``to``'s ``_to_copy``, ``contiguous``'s ``clone``): their self time is dispatch, as no bandwidth
prices it (a resnet18 step at batch 2 held 0.8 ms of ``aten::view`` on a loaded core)."""


def op_part(name: str) -> StepPart | None:
    """The part an aten op's self time belongs to, by its op's family in the registry (`profiled_op`);
    per-op dispatch for an op that moves no byte (`METADATA`); memory-bound for every other aten op; None
    for what is not an aten op (wrappers, engine)."""
    if not name.startswith("aten::"):
        return None
    if name in METADATA:
        return StepPart.DISPATCH
    op = profiled_op(name)
    return _PARTS.get(op.family, StepPart.MEMORY_BOUND) if op is not None else StepPart.MEMORY_BOUND


def _within(event: Any, outer: Callable[[str], bool]) -> bool:
    """Whether a call ``outer`` names encloses ``event``."""
    parent = event.cpu_parent
    while parent is not None:
        if outer(parent.name):
            return True
        parent = parent.cpu_parent
    return False


def _optimizer(name: str) -> bool:
    """``Optimizer.step`` (on a CPU, SGD updates with plain element-wise ops, not ``_foreach``)."""
    return name.startswith("Optimizer.step")


def _layer(name: str) -> bool:
    return op_part(name) is StepPart.LAYERS


def kernel_parts(events: Iterable[Any], steps: int) -> dict[StepPart, float]:
    """Seconds per step of the layers' and the memory-bound ops' kernels: aten ops' self time outside the
    optimizer, by part (an op that moves no byte is in neither: `split_step` leaves it to dispatch). An op
    inside a convolution or matrix product is that layer's (its fills, copies, allocations and views), as
    the micro-benchmark that prices the layer times them: the stride-1 1x1 convolutions' path below batch
    16 fills its buffers in ``aten::fill_``, 9 of regnet_x_400mf's 28 ms at batch 2."""
    parts = {StepPart.LAYERS: 0.0, StepPart.MEMORY_BOUND: 0.0}
    for event in events:
        part = op_part(event.name)
        if part is None or part is StepPart.OPTIMIZER or _within(event, _optimizer):
            continue
        if part is not StepPart.LAYERS and _within(event, _layer):
            part = StepPart.LAYERS
        if part in parts:
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


_KINETO_QUIET = "6"
"""Above libkineto's highest level (USDT, 5): none of its lines, which `advisor profile` would print amid
its table; the profiler's failures still raise in Python."""


def _own_time(training: Training) -> tuple[float, float, bool]:
    """One step's seconds less what it waited for the CPU, its ``Optimizer.step``'s seconds, and whether
    it waited over `DISTURBED_SHARE` of its time."""
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
    return wall - waited, sum(spent), waited > DISTURBED_SHARE * wall


def _timed(training: Training, steps: int) -> tuple[float, float]:
    """The median step's seconds and its optimizer's, of ``steps`` unprofiled steps that did not wait for
    the CPU (each one that did taken again, as a benchmark's groups are: `timing_more`)."""
    taken: list[tuple[float, float, bool]] = []
    while timing_more([t[2] for t in taken], steps, paced=True):
        taken.append(_own_time(training))
    kept = [t for t in taken if not t[2]] or taken
    return median(t[0] for t in kept), median(t[1] for t in kept)


def unwaited(kernels: dict[StepPart, float], waited_share: float) -> dict[StepPart, float]:
    """Kernels' seconds less what they waited for the CPU: a run that waited a share of its wall time
    holds that share of the wait in its events' self time, as time slices land wherever the run is (on a
    contended core a resnet18 step's profiled convolutions took longer than its whole unprofiled step)."""
    return {part: seconds * (1.0 - min(max(waited_share, 0.0), 1.0)) for part, seconds in kernels.items()}


def least(runs: Iterable[dict[StepPart, float]]) -> dict[StepPart, float]:
    """Each part's least seconds over profiled runs: the profiler's own cost lands in the kernels' self
    time in some runs and not in others, and only adds (benchmarks/README.md)."""
    kept = list(runs)
    return {part: min(run[part] for run in kept) for part in kept[0]}


@dataclass(frozen=True)
class ProfiledRound:
    """Unprofiled steps and a profiled run of the same steps, one after the other (`profile_step`)."""

    wall_s: float
    """The unprofiled steps' median, less what they waited for the CPU."""
    optimizer_s: float
    kernels: dict[StepPart, float]
    """The profiled run's kernels by part, per step (`kernel_parts`), its wait taken out (`unwaited`)."""


def split_rounds(rounds: Sequence[ProfiledRound]) -> dict[StepPart, float]:
    """The step's parts (`split_step`), each its least over ``rounds``: the optimizer, the rest of the
    unprofiled step, and each kernel part, so that dispatch is the least step less the least kernels."""
    optimizer = min(r.optimizer_s for r in rounds)
    rest = min(r.wall_s - r.optimizer_s for r in rounds)
    return split_step(optimizer + rest, optimizer, least(r.kernels for r in rounds))


def _profiled_run(training: Training, steps: int) -> dict[StepPart, float]:
    """The kernels' seconds per step of ``steps`` profiled steps, the run's wait for the CPU taken out."""
    # libkineto reads its log level when the profiler first starts; unset, it writes a line to stderr at
    # every start and stop (and an error on a machine without a GPU), over the command's own output.
    os.environ.setdefault("KINETO_LOG_LEVEL", _KINETO_QUIET)
    waited, start = run_delay_s(), time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as profiled:
        for _ in range(steps):
            training.compute(*training.fetch())
    wall, waited = time.perf_counter() - start, run_delay_s() - waited
    return unwaited(kernel_parts(profiled.events(), steps), waited / wall)


def _round(training: Training, steps: int) -> ProfiledRound:
    wall, optimizer = _timed(training, steps)
    return ProfiledRound(wall, optimizer, _profiled_run(training, steps))


def profile_step(
    config: StepConfig, device: torch.device, steps: int = 5, *, allow_factories: bool = False
) -> dict[StepPart, float]:
    """Seconds per step of each part after two untimed steps: `RETIMES` rounds of ``steps`` unprofiled
    steps (their median) then ``steps`` profiled ones, split by their least (`split_rounds`)."""
    warmup = 2
    # Each round's unprofiled steps may be taken again up to RETIMES times (`timing_more`).
    batches = warmup + RETIMES * steps * (RETIMES + 1)
    training = start_training(config, device, batches, allow_factories=allow_factories)
    for _ in range(warmup):
        training.compute(*training.fetch())
    return split_rounds([_round(training, steps) for _ in range(RETIMES)])
