"""What one op kind declares: the layers it covers, its costs, its benchmark configuration and builder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from advisor.introspect import Layer
from advisor.ops.costs import Cost
from advisor.records import LayerConfig


class KernelPath(StrEnum):
    """Stride-1 1x1 convolutions take kernels of their own on a CPU (PyTorch runs them without oneDNN below
    batch 16), and their micro-benchmarks stray from their time inside a network otherwise than the rest's."""

    POINTWISE = "pointwise"
    OTHER = "other"


ALIGNMENT_CAP = 6
"""Channels per group counted aligned up to 64 (2**6): past that every kernel's channel block divides them."""


def group_alignment(config: LayerConfig) -> int:
    """How the channels of one group align with a kernel's channel blocks: log2 of the largest power of two
    dividing both the input's and the output's channels per group, at most `ALIGNMENT_CAP`. Vector kernels
    block channels by the SIMD width, and a group width off the block takes other kernels: on this project's
    CPU (AVX-512) oneDNN runs a grouped 3x3 of 16 or 32 channels per group on 16-blocked JIT kernels, one of 8
    or 24 blocks by 8 and takes its weight gradient by GEMM, 3-5 times slower at batch 128; a layer model
    that sees only channels and groups prices the one as the other (benchmarks/README.md, issue 51)."""
    per_group = (config.in_channels // config.groups, config.out_channels // config.groups)
    return min(_twos(n) for n in per_group)


def _twos(n: int) -> int:
    """The power of two in ``n``, at most `ALIGNMENT_CAP` (0 for an odd or zero ``n``)."""
    twos = 0
    while n > 0 and n % 2 == 0 and twos < ALIGNMENT_CAP:
        n //= 2
        twos += 1
    return twos


Configure = Callable[[Layer, int, bool], LayerConfig | None]
"""How a layer becomes an op's benchmark configuration at a batch and precision."""
Sweep = Callable[[int], LayerConfig]
"""A memory-bound op's configuration over a tensor of so many elements: the bandwidth sweep's."""
Family = Literal["convolution", "matrix", "vector", "update", "launch"]
"""What bounds an op: convolutions and matrix products are compute, vector ops and updates bandwidth, a
chain of tiny ops its launches."""


def _everything(_config: LayerConfig) -> bool:
    return True


def _other_path(_config: LayerConfig) -> KernelPath:
    return KernelPath.OTHER


@dataclass(frozen=True)
class Op:
    """One op kind. ``name`` is its benchmark configuration's ``LayerConfig.op`` too; kinds that share a
    configuration (dense, grouped and depthwise convolutions) tell theirs apart by ``covers``."""

    name: str
    family: Family
    kinds: frozenset[str]
    """The introspection's `LayerKind`s it covers; none for what no layer table holds (the loss, the
    optimizer's update)."""
    cost: Callable[[LayerConfig], Cost]
    builder: str
    """``module:function`` returning its torch workload (`advisor.ops.workloads`), imported only to run it."""
    config: Configure | None = None
    """How a layer of its kinds becomes its benchmark configuration at a batch and precision; None where
    the layer is not this op (a softmax among activations) or no layer is."""
    config_op: str = ""
    """The ``LayerConfig.op`` its configurations carry, where another op's (``conv2d`` for grouped); else
    its name."""
    covers: Callable[[LayerConfig], bool] = _everything
    timed: bool = False
    """Micro-benchmarked on the nightly grid, its measured time a step feature (its ``group``'s)."""
    group: str = ""
    """The step feature its timed layers' seconds add to."""
    kernel_path: Callable[[LayerConfig], KernelPath] = _other_path
    sweep: Sweep | None = None
    """How the nightly grid's bandwidth sweep (`advisor.bench.sweeps`) sizes it; None: not swept."""
    aten: tuple[str, ...] = ()
    """The aten ops a profiler names for its kernels (``fnmatch`` patterns), for `advisor profile`; a
    profile cannot tell dense, grouped and depthwise convolutions apart, so the first claims them all."""

    @property
    def config_name(self) -> str:
        return self.config_op or self.name
