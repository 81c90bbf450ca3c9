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
from itertools import pairwise
from typing import Any, TypeVar

import torch
import torchvision
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.data import DataLoader, Dataset

from advisor.bench.records import LayerConfig, LayerMeasurement, StepConfig, StepMeasurement
from advisor.bench.zoo import distinct_layers, zoo_model
from advisor.introspect import LayerTable, Optimizer, Precision, estimate_peak_memory
from advisor.introspect.run import introspect

_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory", "not enough memory")
_ERROR_CHARS = 2000
_IMAGE_POOL = 32
T = TypeVar("T")


def zoo_table(model: str, input_size: int) -> LayerTable:
    """The layer table of a zoo model, built exactly as the benchmark builds the model."""
    kwargs = zoo_model(model).kwargs(input_size)
    return introspect(model, (3, input_size, input_size), kwargs, allow_factories=False)


def layer_configs(
    model: str,
    input_size: int,
    batches: Sequence[int],
    *,
    amp: Sequence[bool] = (False,),
    cudnn_benchmark: Sequence[bool] = (True,),
) -> list[LayerConfig]:
    """The distinct convolution and linear configurations of a zoo model, at every combination asked for."""
    return [
        config.model_copy(update={"batch": batch, "amp": use_amp, "cudnn_benchmark": benchmark})
        for config, _ in distinct_layers(zoo_table(model, input_size))
        for batch in batches
        for use_amp in amp
        for benchmark in cudnn_benchmark
    ]


def is_out_of_memory(error: BaseException) -> bool:
    if isinstance(error, torch.cuda.OutOfMemoryError | MemoryError):
        return True
    return isinstance(error, RuntimeError) and any(text in str(error).lower() for text in _OOM_TEXT)


def amp_dtype(device: torch.device) -> torch.dtype:
    """bf16 where the device has it (no loss scaling needed), else fp16 with a GradScaler."""
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16
    return torch.bfloat16


def measure_step(
    config: StepConfig,
    device: torch.device,
    steps: int,
    warmup: int,
    memory_limit_bytes: int | None = None,
) -> StepMeasurement:
    """Median time of a real training step, its non-device share and its peak memory."""
    table = zoo_table(config.model, config.input_size)

    def result(measured: tuple[float, float] | None, peak: int | None, error: str | None) -> StepMeasurement:
        median_s, share = measured if measured and error is None else (None, None)
        return StepMeasurement(
            config=config,
            arch_hash=table.architecture_hash,
            steps=steps,
            median_s=median_s,
            non_device_share=share,
            peak_memory_bytes=peak,
            fits=error is None,
            error=error,
        )

    if memory_limit_bytes is not None:
        precision = Precision.BF16 if config.amp else Precision.FP32
        estimate = estimate_peak_memory(table, config.batch, precision, Optimizer.SGD).total
        if estimate > memory_limit_bytes:
            return result(None, None, _over_limit("estimated", estimate, memory_limit_bytes))
    outcome = _attempt(device, lambda: _train(config, device, steps, warmup))
    if isinstance(outcome, str):
        return result(None, None, outcome)
    step_s, compute_s, peak = outcome
    share = min(max(1.0 - sum(compute_s) / sum(step_s), 0.0), 1.0)
    error = None
    if memory_limit_bytes is not None and peak > memory_limit_bytes:
        error = _over_limit("measured", peak, memory_limit_bytes)
    return result((statistics.median(step_s), share), peak, error)


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


class _SyntheticImages(Dataset[tuple[Tensor, Tensor]]):
    """Decoded-image-like uint8 samples turned into float tensors in the workers, as a real loader does."""

    def __init__(self, length: int, size: int, classes: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.pool = torch.randint(
            0, 256, (_IMAGE_POOL, 3, size, size), dtype=torch.uint8, generator=generator
        )
        self.length = length
        self.classes = classes

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        image = self.pool[index % _IMAGE_POOL].float().div_(255)
        return image, torch.tensor(index % self.classes)


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


def _train(
    config: StepConfig, device: torch.device, steps: int, warmup: int
) -> tuple[list[float], list[float], int]:
    """Per-step wall and compute seconds, and the peak memory in bytes."""
    kwargs = zoo_model(config.model).kwargs(config.input_size)
    model = torchvision.models.get_model(config.model, weights=None, **kwargs).to(device).train()
    memory_format = torch.channels_last if config.channels_last else torch.preserve_format
    model = model.to(memory_format=memory_format)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    dtype = amp_dtype(device)
    scaler = torch.amp.GradScaler(device.type, enabled=config.amp and dtype == torch.float16)
    on_cpu = device.type == "cpu"
    # A CPU takes one more batch: its peak memory is tracked in an extra, untimed step.
    dataset = _SyntheticImages(
        config.batch * (warmup + steps + on_cpu),
        config.input_size,
        zoo_model(config.model).classes(config.input_size),
    )
    loader = DataLoader(
        dataset,
        batch_size=config.batch,
        num_workers=config.workers,
        # Pinning needs an accelerator; on a CPU torch would only warn and ignore it.
        pin_memory=config.pinned and not on_cpu,
        drop_last=True,
    )
    batches = iter(loader)

    def fetch() -> tuple[Tensor, Tensor]:
        images, labels = next(batches)
        images = images.to(device, non_blocking=True, memory_format=memory_format)
        return images, labels.to(device, non_blocking=True)

    def compute(images: Tensor, labels: Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=config.amp):
            loss = criterion(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    for _ in range(warmup):
        compute(*fetch())
    marks = _Marks(device)
    marks.settle()
    if not on_cpu:
        torch.cuda.reset_peak_memory_stats(device)
    starts, fed, done = [], [], []
    for _ in range(steps):
        starts.append(marks.mark())
        batch = fetch()
        fed.append(marks.mark())
        compute(*batch)
        done.append(marks.mark())
    starts.append(marks.mark())
    marks.settle()
    step_s = [marks.seconds(a, b) for a, b in pairwise(starts)]
    compute_s = [marks.seconds(a, b) for a, b in zip(fed, done, strict=True)]
    if not on_cpu:
        return step_s, compute_s, torch.cuda.max_memory_allocated(device)
    optimizer.zero_grad(set_to_none=True)
    images, labels = fetch()
    state = [t for values in optimizer.state.values() for t in values.values() if isinstance(t, Tensor)]
    with _TensorMemory([*model.parameters(), *model.buffers(), *state, images, labels]) as memory:
        compute(images, labels)
    return step_s, compute_s, memory.peak


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
    """Median forward plus backward time of one layer, its input gradient included (as inside a network)."""
    previous = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = config.cudnn_benchmark
    try:
        outcome = _attempt(device, lambda: _time_layer(config, device, repeats, warmup))
    finally:
        torch.backends.cudnn.benchmark = previous
    if isinstance(outcome, str):
        return LayerMeasurement(config=config, median_s=None, fits=False, error=outcome)
    return LayerMeasurement(config=config, median_s=statistics.median(outcome), fits=True)


def _layer(config: LayerConfig) -> tuple[nn.Module, tuple[int, ...]]:
    """The module and its input shape; a linear's rows per sample are ``height * width``."""
    c = config
    if c.op == "linear":
        return nn.Linear(c.in_channels, c.out_channels), (c.batch, c.height, c.width, c.in_channels)
    shape = (c.batch, c.in_channels, c.height, c.width)
    if c.op == "conv2d":
        return nn.Conv2d(
            c.in_channels, c.out_channels, c.kernel, c.stride, c.padding, c.dilation, c.groups
        ), shape
    transposed = nn.ConvTranspose2d(
        c.in_channels, c.out_channels, c.kernel, c.stride, c.padding, groups=c.groups, dilation=c.dilation
    )
    return transposed, shape


def _time_layer(config: LayerConfig, device: torch.device, repeats: int, warmup: int) -> list[float]:
    module, shape = _layer(config)
    module = module.to(device)
    inputs = torch.randn(shape, device=device, requires_grad=True)
    with torch.autocast(device.type, dtype=amp_dtype(device), enabled=config.amp):
        gradient = torch.ones_like(module(inputs))
    marks = _Marks(device)
    spans = []
    for repeat in range(warmup + repeats):
        module.zero_grad(set_to_none=True)
        inputs.grad = None
        start = marks.mark()
        with torch.autocast(device.type, dtype=amp_dtype(device), enabled=config.amp):
            outputs = module(inputs)
        outputs.backward(gradient)
        end = marks.mark()
        if repeat >= warmup:
            spans.append((start, end))
    marks.settle()
    return [marks.seconds(start, end) for start, end in spans]
