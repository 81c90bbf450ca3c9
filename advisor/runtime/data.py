"""Feeding micro-batches: pinned host memory, copies that overlap compute, channels_last inputs.

Pinned (page-locked) memory lets a host-to-GPU copy run asynchronously (`non_blocking`), so the next
micro-batch moves while the current one computes. Without a GPU there is nothing to overlap, and pinning
is left off.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypedDict, TypeVar

import torch

T = TypeVar("T")


class LoaderOptions(TypedDict):
    """Keyword arguments for `torch.utils.data.DataLoader`."""

    num_workers: int
    pin_memory: bool
    persistent_workers: bool


def loader_options(device: torch.device, workers: int) -> LoaderOptions:
    """Pin memory only when batches go to a GPU; keep workers alive between epochs."""
    return LoaderOptions(
        num_workers=workers, pin_memory=device.type == "cuda", persistent_workers=workers > 0
    )


def to_device(tensor: torch.Tensor, device: torch.device, channels_last: bool = False) -> torch.Tensor:
    """`tensor` on `device`, asynchronously from pinned memory, channels_last for image batches if asked."""
    non_blocking = device.type == "cuda" and tensor.is_pinned()
    if channels_last and tensor.dim() == 4:
        return tensor.to(device, non_blocking=non_blocking, memory_format=torch.channels_last)
    return tensor.to(device, non_blocking=non_blocking)


def micro_batches(batches: Iterable[T], grad_accum: int, drop_last: bool = False) -> Iterator[list[T]]:
    """Groups of `grad_accum` consecutive batches, one per optimizer step.

    The last group may be shorter (a smaller batch for that step); `drop_last` drops it instead, as a
    loader's `drop_last` drops a short batch, so an epoch has the steps it had without accumulation.
    """
    group: list[T] = []
    for batch in batches:
        group.append(batch)
        if len(group) == grad_accum:
            yield group
            group = []
    if group and not drop_last:
        yield group
