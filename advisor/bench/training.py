"""A model's training session as the benchmark runs it, and the pace step that times a shared CPU's pace.

Building the model, optimizer and loader lives here so that the pace step and the measured steps train
exactly alike: same optimizer, same loss, same synthetic images.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch
import torchvision
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from advisor.bench.zoo import zoo_sized
from advisor.introspect.reference import resolve_factory
from advisor.records import StepConfig
from advisor.runtime.step import device_autocast

_IMAGE_POOL = 32
_SCHEDSTAT = Path("/proc/thread-self/schedstat")


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


PACE = StepConfig(
    model="resnet18", input_size=32, batch=2, amp=False, channels_last=False, pinned=False, workers=0
)
"""A fixed small step timed before and after each measured step on a CPU, the yardstick of its pace.

A shared CPU's speed drifts by tens of percent over seconds and minutes (its neighbours' memory traffic,
not its clock), so one configuration's raw medians taken minutes apart differ by up to half. Its ratio to
the pace step around it drifts by a few percent. A GPU is timed by its own stream's events, which the
host does not slow, and a loader with workers would prefetch while the pace step runs: neither is paced.
"""


@dataclass(frozen=True)
class Training:
    """A model, its optimizer and its loader, ready to take steps."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    fetch: Callable[[], tuple[Tensor, Tensor]]
    compute: Callable[[Tensor, Tensor], None]


def _network(config: StepConfig, allow_factories: bool) -> tuple[nn.Module, int]:
    """The network a step trains and its number of classes: a zoo model exactly as the zoo builds it, any
    other torchvision name (a factory only in the caller's own process) with its defaults."""
    zoo = zoo_sized(config.model, config.input_size)
    if zoo is not None:
        network = torchvision.models.get_model(config.model, weights=None, **zoo.kwargs(config.input_size))
        return network, zoo.classes(config.input_size)
    model = resolve_factory(config.model, allow_factories=allow_factories)()
    if not isinstance(model, nn.Module):
        raise TypeError(f"{config.model!r} returned {type(model).__name__}, not a torch.nn.Module")
    with torch.no_grad():  # two samples: batch norm needs more than one value per channel
        classes = model.eval()(torch.zeros(2, 3, config.input_size, config.input_size)).shape[-1]
    return model, int(classes)


def start_training(
    config: StepConfig, device: torch.device, batches: int, *, allow_factories: bool = False
) -> Training:
    zoo = zoo_sized(config.model, config.input_size)
    if zoo is not None and zoo.reference is not None:  # a transformer of the zoo's family
        from advisor.bench.sequence import start_sequence_training

        return start_sequence_training(config, device)
    network, classes = _network(config, allow_factories)
    model = network.to(device).train()
    memory_format = torch.channels_last if config.channels_last else torch.preserve_format
    model = model.to(memory_format=memory_format)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    plan = device_autocast("bf16", device)  # mixed precision as a training job on this device runs it
    scaler = torch.amp.GradScaler(device.type, enabled=config.amp and plan.scaled)
    dataset = _SyntheticImages(config.batch * batches, config.input_size, classes)
    loader = DataLoader(
        dataset,
        batch_size=config.batch,
        num_workers=config.workers,
        # Pinning needs an accelerator; on a CPU torch would only warn and ignore it.
        pin_memory=config.pinned and device.type != "cpu",
        drop_last=True,
    )
    loaded = iter(loader)

    def fetch() -> tuple[Tensor, Tensor]:
        images, labels = next(loaded)
        images = images.to(device, non_blocking=True, memory_format=memory_format)
        return images, labels.to(device, non_blocking=True)

    def compute(images: Tensor, labels: Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=plan.dtype, enabled=config.amp):
            loss = criterion(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return Training(model, optimizer, fetch, compute)


def run_delay_s() -> float:
    """Seconds this thread has waited, ready to run, while another task held its CPU (the kernel's
    schedstat); 0.0 where the kernel keeps no such count.

    A shared CPU's time slices go to other processes for whole milliseconds; the wall clock counts them
    against whatever is being timed (on a VM shared by several people, a step's wall time was up to ten
    times its own: benchmarks/README.md), this count takes them out.
    """
    try:
        return int(_SCHEDSTAT.read_text(encoding="ascii").split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def pace_training() -> Training:
    """The pace step's training, whose network never learns (a learning rate of 0): the same weights, and
    so the same work, at every call. Trained on its one batch call after call, it had learned that batch
    by a few hundred calls, and its backward then ran into subnormal numbers, which this CPU computes
    slowly: 61 ms a call at first, 108 ms after a thousand, the steps it paced unchanged
    (benchmarks/README.md)."""
    training = start_training(PACE, torch.device("cpu"), batches=1)
    for group in training.optimizer.param_groups:
        group["lr"] = 0.0
    return training


@cache
def pace_step() -> Callable[[], float]:
    """The CPU's pace step, built and warmed once per process, so that each process paces what it measures
    by its own (a step measured apart, by its child's: `advisor.bench.apart`); it returns its own time: the
    wall time less what it waited for the CPU (`run_delay_s`), as the steps it paces are timed."""
    training = pace_training()
    batch = training.fetch()

    def timed() -> float:
        waited, began = run_delay_s(), time.perf_counter()
        training.compute(*batch)
        return time.perf_counter() - began - (run_delay_s() - waited)

    for _ in range(2):
        timed()
    return timed
