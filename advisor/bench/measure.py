"""Timing real training steps and single layers with torch, on the device the benchmark job was given.

Running out of memory is a result, not a failure: the largest batch that fits is part of what a night
measures, so every allocation failure becomes ``fits=False`` with the error text.
"""

from __future__ import annotations

import gc
import statistics
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from math import ceil
from typing import Any, TypeVar

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from advisor.bench.tables import model_table
from advisor.bench.training import Training, pace_step, run_delay_s, start_training
from advisor.introspect import Optimizer, estimate_peak_memory
from advisor.ops.workloads import build
from advisor.precision import Precision
from advisor.records import LayerConfig, LayerMeasurement, StepConfig, StepMeasurement

GROUP_S = 0.3
"""A paced step shorter than this is timed in a group of steps this long: a lone 10 ms step is all noise."""
MAX_GROUP = 64
DISTURBED_SHARE = 0.05
"""A paced group that waited this share of its time for the CPU is timed again (`_time_groups`)."""
RETIMES = 3
"""A measurement times at most this many times the groups it keeps."""
_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory", "not enough memory")
_ERROR_CHARS = 2000
T = TypeVar("T")


def is_out_of_memory(error: BaseException) -> bool:
    if isinstance(error, torch.cuda.OutOfMemoryError | MemoryError):
        return True
    return isinstance(error, RuntimeError) and any(text in str(error).lower() for text in _OOM_TEXT)


def measure_step(
    config: StepConfig,
    device: torch.device,
    steps: int,
    warmup: int,
    memory_limit_bytes: int | None = None,
    *,
    allow_factories: bool = False,
) -> StepMeasurement:
    """Median time of a real training step, its non-device share, its pace ratio and its peak memory.
    ``allow_factories``: only in the caller's own process (`advisor bench run --architecture`)."""
    table = model_table(config.model, config.input_size, allow_factories=allow_factories)
    measurement = unmeasured_step(config, table.architecture_hash, steps)
    if memory_limit_bytes is not None:
        precision = Precision.BF16 if config.amp else Precision.FP32
        estimate = estimate_peak_memory(table, config.batch, precision, Optimizer.SGD).total
        if estimate > memory_limit_bytes:
            return measurement.model_copy(
                update={"error": _over_limit("estimated", estimate, memory_limit_bytes)}
            )
    outcome = _attempt(device, lambda: _train(config, device, steps, warmup, allow_factories))
    if isinstance(outcome, str):
        return measurement.model_copy(update={"error": outcome})
    if memory_limit_bytes is not None and outcome.peak_bytes > memory_limit_bytes:
        error = _over_limit("measured", outcome.peak_bytes, memory_limit_bytes)
        return measurement.model_copy(update={"peak_memory_bytes": outcome.peak_bytes, "error": error})
    paced = bool(outcome.pace_s)
    return measurement.model_copy(
        update={
            "median_s": statistics.median(outcome.step_s),
            "non_device_share": min(max(1.0 - sum(outcome.compute_s) / sum(outcome.step_s), 0.0), 1.0),
            "peak_memory_bytes": outcome.peak_bytes,
            "fits": True,
            "steps": len(outcome.step_s) * outcome.group,
            "pace_ratio": statistics.median(outcome.pace_ratios()) if paced else None,
            "pace_s": statistics.median(outcome.pace_s) if paced else None,
        }
    )


def unmeasured_step(
    config: StepConfig, arch_hash: str, steps: int, error: str | None = None
) -> StepMeasurement:
    """A step's record before (or without) its measurement: nothing timed, not fitting, ``error`` why."""
    return StepMeasurement(
        config=config,
        arch_hash=arch_hash,
        steps=steps,
        median_s=None,
        non_device_share=None,
        peak_memory_bytes=None,
        fits=False,
        error=error,
    )


def _over_limit(how: str, peak: int, limit: int) -> str:
    return f"{how} peak memory {peak} B exceeds the limit of {limit} B"


def _attempt(device: torch.device, run: Callable[[], T]) -> T | str:
    """``run``'s result, or the error text when it ran out of memory; its memory is returned either way."""
    try:
        outcome: T | str = run()
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        outcome = f"{type(error).__name__}: {error}"[:_ERROR_CHARS]
    # Only now, with the exception and its frames gone, can their tensors be freed.
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return outcome


class _Marks:
    """Time marks: the host clock on a CPU, CUDA events on a GPU (which time the device's own stream)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        event.record()
        return event

    def seconds(self, start: Any, end: Any) -> float:
        """After ``settle``: the time between two marks."""
        return float(start.elapsed_time(end)) / 1000 if self.cuda else float(end - start)

    def settle(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


@dataclass(frozen=True)
class _TimedGroup:
    """One timed group of steps: its marks, and on a CPU what it waited for the CPU (`run_delay_s`)."""

    start: Any
    spans: list[tuple[Any, Any]]
    """Each step's marks once its batch was fed and once it was done."""
    waited_s: float = 0.0
    disturbed: bool = False


@dataclass(frozen=True)
class _Timings:
    step_s: list[float]
    """Each timed group's seconds per step, less what it waited for the CPU; the disturbed ones left out
    where any group was not."""
    compute_s: list[float]
    peak_bytes: int
    group: int
    pace_s: list[float]
    """The pace step's times around each group kept in ``step_s`` (before and after it); empty if
    unpaced."""

    def pace_ratios(self) -> list[float]:
        pairs = zip(self.step_s, self.paces(), strict=True)
        return [step / statistics.mean(around) for step, around in pairs]

    def paces(self) -> list[tuple[float, float]]:
        return list(zip(self.pace_s[::2], self.pace_s[1::2], strict=True))


def _train(
    config: StepConfig, device: torch.device, steps: int, warmup: int, allow_factories: bool
) -> _Timings:
    on_cpu = device.type == "cpu"
    pace = pace_step() if on_cpu and config.workers == 0 else None
    # Enough batches for the largest groups, timed again where disturbed; the loader makes them only as
    # they are asked for. A CPU takes one more: its peak memory is tracked in an extra, untimed step.
    batches = warmup + steps * (RETIMES * MAX_GROUP if pace else 1) + on_cpu
    training = start_training(config, device, batches, allow_factories=allow_factories)
    warm_s = 0.0
    for _ in range(warmup):
        began = time.perf_counter()
        training.compute(*training.fetch())
        warm_s = time.perf_counter() - began
    group = min(MAX_GROUP, max(1, ceil(GROUP_S / warm_s))) if pace and warm_s else 1
    marks = _Marks(device)
    marks.settle()
    if not on_cpu:
        torch.cuda.reset_peak_memory_stats(device)
    groups, paces = _time_groups(training, marks, steps, group, pace)
    marks.settle()
    kept = [(g, p) for g, p in zip(groups, paces, strict=True) if not g.disturbed] or list(
        zip(groups, paces, strict=True)
    )
    wall_s = [marks.seconds(g.start, g.spans[-1][1]) for g, _ in kept]
    step_s = [(wall - g.waited_s) / group for wall, (g, _) in zip(wall_s, kept, strict=True)]
    # The compute's share of each group's wall time, applied to its own time.
    compute_s = [
        sum(marks.seconds(fed, done) for fed, done in g.spans) / wall * step
        for wall, step, (g, _) in zip(wall_s, step_s, kept, strict=True)
    ]
    pace_s = [s for _, around in kept for s in around if around]
    if not on_cpu:
        return _Timings(step_s, compute_s, torch.cuda.max_memory_allocated(device), group, pace_s)
    training.optimizer.zero_grad(set_to_none=True)
    images, labels = training.fetch()
    state = [
        t for values in training.optimizer.state.values() for t in values.values() if isinstance(t, Tensor)
    ]
    existing = [*training.model.parameters(), *training.model.buffers(), *state, images, labels]
    with _TensorMemory(existing) as memory:
        training.compute(images, labels)
    return _Timings(step_s, compute_s, memory.peak, group, pace_s)


def _time_groups(
    training: Training, marks: _Marks, steps: int, group: int, pace: Callable[[], float] | None
) -> tuple[list[_TimedGroup], list[tuple[float, ...]]]:
    """``steps`` groups of ``group`` steps and, paced, the pace step's times before and after each.

    Paced (a CPU), a group that waited for the CPU more than `DISTURBED_SHARE` of its time is timed
    again, up to `RETIMES` x ``steps`` groups in all: its own time leaves the wait out, but the other
    tasks' time slices also emptied its caches (squeezenet1_1 at batch 4: 4.6 ms a step quiet, up to
    7.9 ms of its own time on a contended core of the shared VM).
    """
    groups: list[_TimedGroup] = []
    paces: list[tuple[float, ...]] = []
    before = pace() if pace else None
    while timing_more([g.disturbed for g in groups], steps, paced=pace is not None):
        waited, began = run_delay_s() if pace else 0.0, time.perf_counter()
        start, spans = marks.mark(), []
        for _ in range(group):
            batch = training.fetch()
            fed = marks.mark()
            training.compute(*batch)
            spans.append((fed, marks.mark()))
        waited = run_delay_s() - waited if pace else 0.0
        disturbed = waited > DISTURBED_SHARE * (time.perf_counter() - began)
        groups.append(_TimedGroup(start, spans, waited, disturbed))
        after = pace() if pace else None
        paces.append((before, after) if before is not None and after is not None else ())
        before = after
    return groups, paces


def timing_more(disturbed: Sequence[bool], wanted: int, *, paced: bool) -> bool:
    """Whether to time one more group or repeat: fewer than ``wanted`` undisturbed so far, and fewer than
    `RETIMES` x ``wanted`` timed in all (unpaced, ``wanted`` in all: nothing is judged disturbed)."""
    return len(disturbed) < wanted * (RETIMES if paced else 1) and disturbed.count(False) < wanted


class _TensorMemory(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch leaves it untyped
    """Peak bytes of live CPU tensor storage during a step.

    The CPU allocator keeps no statistics and a process's peak RSS never comes down between
    configurations, so every op's outputs are tracked instead, each storage until it is freed (a weak
    reference's callback). Counting storages, not tensors, counts views once; like CUDA's
    ``max_memory_allocated`` it sees tensors, not library workspaces or allocator caching.
    """

    def __init__(self, existing: Iterable[Tensor]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.live: dict[int, int] = {}
        self._refs: dict[int, weakref.ref[torch.UntypedStorage]] = {}
        self.current = 0
        self.peak = 0
        for tensor in existing:
            self._track(tensor.untyped_storage())

    def _track(self, storage: torch.UntypedStorage) -> None:
        key, size = storage.data_ptr(), storage.nbytes()
        if not size or key in self.live:
            return
        self.live[key] = size
        self.current += size
        self.peak = max(self.peak, self.current)
        self._refs[key] = weakref.ref(storage, lambda _: self._free(key))

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key)
        del self._refs[key]

    def __torch_dispatch__(
        self,
        func: Callable[..., Any],
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        for value in tree_leaves(out):
            if isinstance(value, Tensor) and value.device.type == "cpu":
                self._track(value.untyped_storage())
        return out


def measure_layer(config: LayerConfig, device: torch.device, repeats: int, warmup: int) -> LayerMeasurement:
    """Median time of one op's workload (`advisor.ops.workloads`: a layer's forward plus backward, its input
    gradient included, as inside a network), and on a CPU its ratio to the pace step around it."""
    previous = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = config.cudnn_benchmark
    try:
        outcome = _attempt(device, lambda: _time_layer(config, device, repeats, warmup))
    finally:
        torch.backends.cudnn.benchmark = previous
    if isinstance(outcome, str):
        return LayerMeasurement(config=config, median_s=None, fits=False, error=outcome)
    seconds, pace_s = outcome
    paced = statistics.mean(pace_s) if pace_s else None
    return LayerMeasurement(
        config=config,
        median_s=statistics.median(seconds),
        fits=True,
        pace_ratio=statistics.median(seconds) / paced if paced else None,
        pace_s=paced,
    )


def _time_layer(
    config: LayerConfig, device: torch.device, repeats: int, warmup: int
) -> tuple[list[float], list[float]]:
    """The repeats' times and, on a CPU, the pace step's just before the warm-up and after the repeats. On
    a CPU a repeat is timed less what it waited for the CPU, and one disturbed (`DISTURBED_SHARE`) is run
    again, up to `RETIMES` x ``repeats`` runs in all, as steps are (`_time_groups`). The warm-up comes
    after the pace step: run between the warm-up and the repeats, the pace step left the first repeat after
    it about ten times slow and the second 1.7 times, so the CPU grid's median of three read a small layer
    or swept op slow (a 1 Ki-element ReLU 40-44 us, now 30-31 us, in 20 repeats 21 us: the first few timed
    runs are slow even so; benchmarks/README.md, issue 51)."""
    pace = pace_step() if device.type == "cpu" else None
    workload = build(config, device)
    marks = _Marks(device)
    pace_s = [pace()] if pace else []
    for _ in range(warmup):
        workload.reset()
        workload.run()
    runs: list[tuple[Any, Any, float, bool]] = []
    while timing_more([run[3] for run in runs], repeats, paced=pace is not None):
        workload.reset()
        waited = run_delay_s() if pace else 0.0
        start = marks.mark()
        workload.run()
        end = marks.mark()
        waited = run_delay_s() - waited if pace else 0.0
        runs.append((start, end, waited, bool(pace) and waited > DISTURBED_SHARE * (end - start)))
    marks.settle()
    if pace:
        pace_s.append(pace())
    kept = [run for run in runs if not run[3]] or runs
    own = [marks.seconds(start, end) - waited for start, end, waited, _ in kept]
    # A run so short that reading the wait took longer than it: its wall time.
    return [
        o if o > 0 else marks.seconds(start, end) for o, (start, end, _, _) in zip(own, kept, strict=True)
    ], pace_s
