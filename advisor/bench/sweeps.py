"""What the nightly grid measures beyond compute: memory-bound ops over tensor sizes (the machine's bandwidth
curve), a chain of tiny ops (what each launch costs), the same chain as modules (what a module call costs),
chains of tiny real layers (what a layer of each kind pays outside its kernels), and the optimizer's update
over parameter counts.

A step's time is not only its convolutions and matrix products: on a small batch its norms, activations and
element-wise ops are bound by bytes, each op pays a fixed launch and dispatch cost, and the optimizer's
update scales with the parameters, not the batch. Pure planning: which configurations, in which order;
`advisor.ops.rates` fits the machine's rates from what they measure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from random import Random
from typing import Literal, TypeVar

from advisor.ops import configs, known, op_of
from advisor.records import LayerConfig

SweepPhase = Literal["bandwidth", "launches", "updates"]
"""The plan phases (`advisor.bench.plan.Phase`) the sweeps are measured in."""
UPDATES = ("sgd_momentum", "adam", "adamw")
"""The optimizers whose update is swept (the registry's update ops)."""
CHAIN_ELEMENTS = 16
"""Values each op of the launch chain works on: so few that its time is its launch."""


def powers(low: int, high: int) -> tuple[int, ...]:
    """``4**low`` to ``4**high``: a rate changes smoothly in log-size, and a power of 4 over 64 channels is
    a square map."""
    return tuple(4**k for k in range(low, high + 1))


@dataclass(frozen=True)
class Sweeps:
    """The sizes a grid sweeps; empty: none of that kind measured."""

    elements: tuple[int, ...]
    """Tensor sizes of the memory-bound ops, in elements: from launch-bound to past the last cache."""
    chains: tuple[int, ...]
    """Lengths of the launch chain, the module chain and the tiny-layer chains: the first's slope in them is
    one launch's cost, the second's less it a module call's, each tiny chain's a layer's of its kind."""
    parameters: tuple[int, ...]
    """Parameter counts of the optimizer's update."""
    tensors: tuple[int, ...]
    """How many tensors the parameters are split into: the update's cost per tensor apart from its cost
    per parameter."""
    ops: tuple[str, ...] = ()
    """The memory-bound ops swept; none: every registry op with a ``sweep`` (a new one is swept as added)."""
    update_places: int = 1
    """Times a night measures each update configuration (`scattered`): a few seconds of rows price every
    optimizer step, and one slow spell of the node (another core's work) priced them 1.1-1.5 times too
    slow in a whole pass (benchmarks/README.md). Four: a configuration's rows of one run count by their
    interquartile mean (`advisor.predict.registry`), which then leaves out the slowest and the fastest."""

    def thin(self) -> Sweeps:
        """Every other size, both ends kept, and every split: a check plan's look at the same curves."""
        return replace(
            self, elements=_ends(self.elements), chains=_ends(self.chains), parameters=_ends(self.parameters)
        )


def _ends(sizes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(dict.fromkeys((*sizes[::2], *sizes[-1:])))


NO_SWEEPS = Sweeps(elements=(), chains=(), parameters=(), tensors=())
CPU_SWEEPS = Sweeps(
    elements=powers(5, 12),
    chains=(16, 64, 256),
    parameters=powers(7, 12),
    tensors=(1, 64, 256),
    update_places=4,
)
"""From 1 Ki to 16 Mi elements (4 KiB to 64 MiB in FP32: caches, then memory); 16 Ki to 16 Mi parameters
(the CPU zoo's models have 0.1 to 25 M) in 1, 64 and 256 tensors: a network's 60-400 (resnet18 62,
mobilenet_v2 158, densenet121 364) lie between splits measured, not past them (from 1 and 64 alone,
mobilenet_v2's update was priced 1.3 times its profiled share: benchmarks/README.md)."""
CUDA_SWEEPS = replace(CPU_SWEEPS, elements=powers(5, 14), parameters=powers(7, 14))
"""Up to 256 Mi elements (1 GiB tensors) and parameters: a GPU's bandwidth is reached only by large ones."""


def bandwidth_configs(sweeps: Sweeps) -> list[LayerConfig]:
    """Each swept op at each size, size-major: a cut plan has every op's small sizes first."""
    ops = [op for op in known.OPS if op.sweep is not None and (not sweeps.ops or op.name in sweeps.ops)]
    return [op.sweep(size) for size in sweeps.elements for op in ops if op.sweep is not None]


def launch_configs(sweeps: Sweeps) -> list[LayerConfig]:
    """Each length of the launch chain, then of the module chain, then of each tiny-layer chain."""
    chains = [
        chain(length, CHAIN_ELEMENTS)
        for chain in (configs.launch_chain, configs.module_chain)
        for length in sweeps.chains
    ]
    tiny = sorted(set(known.TINY_LAYERS.values()))
    return [*chains, *(configs.tiny_chain(name, length) for name in tiny for length in sweeps.chains)]


def update_configs(sweeps: Sweeps) -> list[LayerConfig]:
    """Each parameter count's updates and release (`_at_count`), count-major."""
    return [config for count in sweeps.parameters for config in _at_count(count, sweeps.tensors)]


def _at_count(count: int, splits: tuple[int, ...]) -> Iterator[LayerConfig]:
    """Each optimizer at each split (none finer than a parameter a tensor), then the gradients' release in
    one tensor: it is priced a layer's weights at a time, and costs nothing per tensor until a block is
    large enough to go back to the kernel."""
    for tensors in splits:
        if count >= tensors:
            yield from (configs.update(optimizer, count, tensors) for optimizer in UPDATES)
    if splits:
        yield configs.update(known.RELEASE, count, 1)


def swept(sweeps: Sweeps) -> list[tuple[SweepPhase, LayerConfig]]:
    """The bandwidth sweep, the launch chain and the optimizer's update, in that order, each with the plan
    phase it is measured in."""
    return [
        *(("bandwidth", config) for config in bandwidth_configs(sweeps)),
        *(("launches", config) for config in launch_configs(sweeps)),
        *(("updates", config) for config in update_configs(sweeps)),
    ]


T = TypeVar("T")


def scattered(items: Sequence[T], again: Callable[[T], bool], places: int, seed: int = 0) -> list[T]:
    """``items`` with each one ``again`` picks measured ``places`` times: where it is, and the others at
    seeded random places after it, each on its own, so that no one spell of a busy node holds them all."""
    random = Random(seed)  # noqa: S311 (places in a plan, not a secret)
    inserts = [
        (random.randint(index + 1, len(items)), item)
        for index, item in enumerate(items)
        if again(item)
        for _ in range(places - 1)
    ]
    placed = list(items)
    for index, item in sorted(inserts, key=lambda insert: -insert[0]):
        placed.insert(index, item)
    return placed


def launches(config: LayerConfig) -> int:
    """Ops a swept configuration launches: a chain's forward and backward ops, an update's per tensor
    (CPUs loop over them), else a forward and a backward."""
    if op_of(config).family == "launch":
        return 2 * config.height
    return config.width if config.op in UPDATES else 2


def sweep_seconds(config: LayerConfig, flops_per_s: float, bytes_per_s: float, launch_s: float) -> float:
    """One run of a swept configuration at assumed rates, to plan by: the slower of its FLOPs and its
    bytes, and its launches."""
    cost = op_of(config).cost(config)
    moved = cost.forward_bytes + cost.backward_bytes
    return max(cost.train_flops / flops_per_s, moved / bytes_per_s) + launches(config) * launch_s
