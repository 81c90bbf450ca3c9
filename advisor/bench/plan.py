"""What a night measures, in which order, and how long it should take: pure planning, no torch, no clock.

The order is the point: a run is cut by its time budget, so what it measures first must be what the
predictors learn most from. The coarse batch grid over every model at default settings comes first, then
what is not compute (`advisor.bench.sweeps`: the machine's bandwidth, launch and optimizer rates, which
every prediction uses, in about a minute on a CPU and seconds on a GPU), then each distinct layer once,
then the rest of the batch grid, then each setting (AMP, channels_last, pinned host memory) in turn, each
new setting crossed with those before it, the layer grid, and last the batch grid again where the grid
asks for more than one pass of it. Durations come from introspected FLOPs and an assumed throughput per
device kind: rough, but enough to cut a plan to a budget."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from itertools import product
from random import Random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.bench.sweeps import CPU_SWEEPS, CUDA_SWEEPS, NO_SWEEPS, Sweeps, scattered, sweep_seconds, swept
from advisor.bench.zoo import (
    CPU_MODELS,
    CPU_SEQUENCE_MODELS,
    CPU_SIZES,
    GPU_SEQUENCE_MODELS,
    GPU_SIZES,
    ZOO,
    distinct_layers,
    layer_costs,
    smallest_batch,
    zoo_model,
)
from advisor.introspect import Layer, LayerTable, Optimizer, estimate_peak_memory
from advisor.ops.configs import (
    dense_convolutions,
    depthwise_convolutions,
    grouped_convolutions,
    linears,
    vocabulary_heads,
)
from advisor.precision import Precision
from advisor.records import LayerConfig, StepConfig

DeviceKind = Literal["cpu", "cuda"]
TableSource = Callable[[str, int], LayerTable]
"""A zoo model's layer table at an input side (introspection, behind a seam so planning stays pure)."""


class Phase(StrEnum):
    COARSE = "coarse"
    BANDWIDTH = "bandwidth"
    LAUNCHES = "launches"
    UPDATES = "updates"
    LAYERS = "layers"
    BATCHES = "batches"
    AMP = "amp"
    CHANNELS_LAST = "channels_last"
    PINNED = "pinned"
    LAYER_GRID = "layer_grid"
    REPEATS = "repeats"


_SETTINGS = (Phase.AMP, Phase.CHANNELS_LAST, Phase.PINNED)
_GRID = (Phase.COARSE, Phase.BATCHES)
_MAX_WORKERS = 4


@dataclass(frozen=True)
class DeviceProfile:
    """The cost model of one device kind; throughputs are assumptions to cut plans by, not predictions."""

    kind: DeviceKind
    memory_bytes: int | None
    """Configurations whose estimated peak exceeds this are not planned; None plans every batch."""
    flops_per_s: float
    amp_speedup: float
    step_overhead_s: float
    item_overhead_s: float
    """Building the model and the optimizer, starting DataLoader workers."""
    layer_overhead_s: float
    layer_item_overhead_s: float
    bytes_per_s: float
    """What a memory-bound op moves per second, forward and backward."""
    launch_s: float
    """One op's launch and dispatch."""
    pace_s: float
    """The pace step timed before and after each CPU micro-benchmark (`advisor.bench.training.PACE`)."""

    @classmethod
    def assumed(cls, kind: DeviceKind, memory_bytes: int | None = None) -> DeviceProfile:
        return replace(_ASSUMED[kind], memory_bytes=memory_bytes)


# CPU: measured on a shared 2-core x86 VM, bf16 emulated (slower); GPU: a data-centre GPU's realistic rate.
_ASSUMED = {
    "cpu": DeviceProfile("cpu", None, 5e9, 0.1, 0.15, 1.0, 0.05, 0.1, 5e9, 2e-5, 0.1),
    "cuda": DeviceProfile("cuda", None, 40e12, 2.0, 0.005, 1.5, 0.0002, 0.05, 2e12, 1e-5, 0.0),
}


class PlanItem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    phase: Phase
    config: StepConfig | LayerConfig
    estimate_s: float = Field(ge=0)


class Plan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    items: tuple[PlanItem, ...]
    steps: int = Field(ge=1)
    warmup: int = Field(ge=0)
    repeats: int = Field(ge=1)
    """Timed repetitions of each layer micro-benchmark."""
    learn_estimates: bool = False
    """The run judges what is left by how long its items took against their estimates (`run_plan`)."""
    processes: tuple[int, ...] = ()
    """Where each fresh process after the first begins, by item index: a first sight's (`run_plan`)."""

    @property
    def estimate_s(self) -> float:
        return sum(item.estimate_s for item in self.items)

    def first(self, count: int) -> Plan:
        return self.model_copy(update={"items": self.items[:count]})


def geometric(high: int, factor: int = 2) -> tuple[int, ...]:
    """1, factor, factor**2, ... up to ``high``: batch time is close to linear in log-batch steps."""
    if high < 1 or factor < 2:
        raise ValueError(f"a geometric grid needs high >= 1 and factor >= 2, not {high}, {factor}")
    sizes = [1]
    while sizes[-1] * factor <= high:
        sizes.append(sizes[-1] * factor)
    return tuple(sizes)


@dataclass(frozen=True)
class Grid:
    """Everything a plan spans; ``coarse`` batches are measured in the first phase, the rest later."""

    models: tuple[str, ...]
    sizes: tuple[int, ...]
    batches: tuple[int, ...]
    coarse: tuple[int, ...]
    settings: tuple[Phase, ...]
    setting_batches: tuple[int, ...]
    """Batches the settings phases cover: a setting changes a ratio, which fewer batches can show."""
    workers: int
    layer_models: tuple[str, ...]
    layer_batches: tuple[int, ...]
    """The first is measured in the layers phase, the others (and AMP) in the layer grid phase."""
    steps: int
    warmup: int
    repeats: int
    sweeps: Sweeps = NO_SWEEPS
    """What is not compute (`advisor.bench.sweeps`): measured right after the coarse grid."""
    step_passes: int = 1
    """Times the grid's steps are measured; later passes last, each in an order of its own."""
    own_layers: tuple[LayerConfig, ...] = ()
    """Layers no zoo model has, the grid's own (`nightly_grid`), measured after the layer models' own where a
    grid has any."""


def nightly_grid(kind: DeviceKind, *, workers: int = 4) -> Grid:
    """What a night measures on one device kind: the one grid, which the evaluations measure too.

    On a GPU, the whole zoo at both input sides and the transformer family at its published sizes and sequence
    lengths (`GPU_SIZES`), every setting, batches up to 4096. On a CPU, the twenty CNNs that train at 32x32 in
    minutes and the small transformer family (`CPU_SIZES`), batches up to 128, no settings (bf16 autocast is
    emulated there), the steps twice (the plan ends within a night), and layers on each side of PyTorch's CPU
    convolution kernel switches (one thread, float32, torch 2.14, seen with ``torch.profiler``): a 3x3 or 1x1
    convolution of a small input runs ``_slow_conv2d`` at batch 1 and oneDNN from 2, a stride-1 1x1
    convolution ``_slow_conv2d`` below 16 and oneDNN from 16. A layer's time is a polyline through its
    batches, so no segment may cross a switch. The first layer batch is measured early, in the layers phase;
    the others later. Beside the zoo's layers, its own in regimes real models reach and the zoo does not:
    dense 5x5 and 7x7 convolutions; depthwise 7x7 ones on maps of 1-8 px, their inputs laid out either way
    (ConvNeXt hands them on channels last); grouped 3x3 ones of 8 channels a
    group on maps of 1-4 px; linears 384-3072 wide, in and out, over 1-96 tokens (none of them a zoo layer);
    language models' heads, 512-1024 wide in and 32,000 or 50,257 out, over 4 tokens a sample.
    """
    if kind == "cpu":
        batches = geometric(128)
        return Grid(
            models=CPU_MODELS + CPU_SEQUENCE_MODELS,
            sizes=CPU_SIZES,
            batches=batches,
            coarse=batches[::2],
            settings=(),
            setting_batches=(),
            workers=0,
            layer_models=CPU_MODELS + CPU_SEQUENCE_MODELS,
            layer_batches=(16, 1, 2, 8, 15, 128),
            steps=3,
            warmup=1,
            repeats=3,
            sweeps=CPU_SWEEPS,
            step_passes=2,
            own_layers=(
                *dense_convolutions((5, 7), (16, 64, 256), (32, 16, 8, 4), most=1024),
                *grouped_convolutions((128, 384, 768), 8, (1, 2, 4)),
                *depthwise_convolutions((7,), (128, 256, 512, 1024), (1, 2, 4, 8), most=2048),
                *depthwise_convolutions((7,), (256, 512, 768, 1024), (1, 2, 4), 2048, channels_last=True),
                *linears((384, 768, 3072), (1, 24, 96), most=2**25),
                *vocabulary_heads((512, 768, 1024), (32000, 50257), 4),
            ),
        )
    batches = geometric(4096)
    models = (*(model.name for model in ZOO), *GPU_SEQUENCE_MODELS)
    return Grid(
        models=models,
        sizes=GPU_SIZES,
        batches=batches,
        coarse=batches[::2],
        settings=_SETTINGS,
        setting_batches=batches,
        workers=workers,
        layer_models=models,
        layer_batches=(32, 1, 8, 128, 512),
        steps=20,
        warmup=5,
        repeats=20,
        sweeps=CUDA_SWEEPS,
    )


def loader_workers(cpus: int) -> int:
    """DataLoader workers of a benchmark job with ``cpus`` CPUs: they share them with torch's threads."""
    return max(1, min(_MAX_WORKERS, cpus // 2))


def full_plan(device: DeviceProfile, tables: TableSource, *, workers: int = 4) -> Plan:
    """The nightly plan of ``device``'s kind (`nightly_grid`), each update measured at several places."""
    grid = nightly_grid(device.kind, workers=workers)
    plan = build_plan(grid, device, tables)
    scatter = scattered(plan.items, updating, grid.sweeps.update_places)
    return plan.model_copy(update={"items": tuple(scatter)})


def updating(item: PlanItem) -> bool:
    return item.phase is Phase.UPDATES


def build_plan(grid: Grid, device: DeviceProfile, tables: TableSource) -> Plan:
    items = [
        *_steps(grid, device, tables, Phase.COARSE, grid.coarse, [(False, False, False)]),
        *_swept(grid, device),
        *_layers(grid, device, tables, Phase.LAYERS, grid.layer_batches[:1], [(False, True)]),
        *_steps(grid, device, tables, Phase.BATCHES, {*grid.batches} - {*grid.coarse}, [(False,) * 3]),
    ]
    varied: set[Phase] = set()
    for phase in (setting for setting in _SETTINGS if setting in grid.settings):
        varied.add(phase)
        items += _steps(grid, device, tables, phase, grid.setting_batches, _settings_of(phase, varied))
    layer_amp = (False, True) if Phase.AMP in grid.settings else (False,)
    # cudnn.benchmark exists only on CUDA; on a CPU the flag would only duplicate measurements.
    benchmark = (True, False) if device.kind == "cuda" else (True,)
    settings = list(product(layer_amp, benchmark))
    items += _layers(grid, device, tables, Phase.LAYER_GRID, grid.layer_batches, settings)
    steps = [item.model_copy(update={"phase": Phase.REPEATS}) for item in items if item.phase in _GRID]
    for again in range(1, grid.step_passes):
        items += Random(again).sample(steps, len(steps))  # noqa: S311 (an order, not a secret)
    return Plan(items=tuple(items), steps=grid.steps, warmup=grid.warmup, repeats=grid.repeats)


def _settings_of(phase: Phase, varied: set[Phase]) -> list[tuple[bool, bool, bool]]:
    """(amp, channels_last, pinned): ``phase``'s setting on, crossed with every setting varied before it."""
    choices = [(True,) if one is phase else (False, True) if one in varied else (False,) for one in _SETTINGS]
    return [(amp, channels_last, pinned) for amp, channels_last, pinned in product(*choices)]


def _steps(
    grid: Grid,
    device: DeviceProfile,
    tables: TableSource,
    phase: Phase,
    batches: Iterable[int],
    settings: Sequence[tuple[bool, bool, bool]],
) -> Iterator[PlanItem]:
    """Batch-major, so a cut plan has every model at small batches before any model at large ones."""
    planned = {
        (name, size): tables(name, size)
        for name in grid.models
        for size in grid.sizes
        if size in zoo_model(name).sizes
    }
    smallest = {key: smallest_batch(table) for key, table in planned.items()}
    amps = {amp for amp, _channels_last, _pinned in settings}
    for batch in sorted(batches):
        # Each model's fit at this batch once per precision, not once per setting that shares it.
        fitting = {
            (key, amp)
            for key, table in planned.items()
            for amp in amps
            if batch >= smallest[key] and _fits(device, table, batch, amp)
        }
        for (amp, channels_last, pinned), ((name, size), table) in product(settings, planned.items()):
            if ((name, size), amp) not in fitting:
                continue
            config = StepConfig(
                model=name,
                input_size=size,
                batch=batch,
                amp=amp,
                channels_last=channels_last,
                pinned=pinned,
                workers=grid.workers,
            )
            yield PlanItem(phase=phase, config=config, estimate_s=step_estimate(grid, device, table, config))


def _layers(
    grid: Grid,
    device: DeviceProfile,
    tables: TableSource,
    phase: Phase,
    batches: Sequence[int],
    settings: Sequence[tuple[bool, bool]],
) -> Iterator[PlanItem]:
    """Each distinct layer, then `Grid.own_layers`, at each batch and setting, batch-major."""
    layers: dict[LayerConfig, Layer | None] = {}
    for name, size in product(grid.layer_models, grid.sizes):
        if size in zoo_model(name).sizes:
            for config, zoo_layer in distinct_layers(tables(name, size)):
                layers.setdefault(config, zoo_layer)
    for own in grid.own_layers if grid.layer_models else ():
        layers.setdefault(own, None)
    for batch, (amp, benchmark) in product(sorted(batches), settings):
        for config, layer in layers.items():
            at = config.model_copy(update={"batch": batch, "amp": amp, "cudnn_benchmark": benchmark})
            moved = layer_costs(at, layer)[1]
            too_big = device.memory_bytes is not None and moved > device.memory_bytes
            # The layer grid leaves out what the layers phase measured.
            first = batch == grid.layer_batches[0] and not amp and benchmark
            if too_big or (phase is Phase.LAYER_GRID and first):
                continue
            yield PlanItem(phase=phase, config=at, estimate_s=layer_estimate(grid, device, layer, at))


def _swept(grid: Grid, device: DeviceProfile) -> Iterator[PlanItem]:
    """What is not compute (`advisor.bench.sweeps`), each item every warm-up and timed repeat."""
    speeds = (device.flops_per_s, device.bytes_per_s, device.launch_s)
    for phase, config in swept(grid.sweeps):
        estimate = _micro_s(grid, device, sweep_seconds(config, *speeds))
        yield PlanItem(phase=Phase(phase), config=config, estimate_s=estimate)


def _fits(device: DeviceProfile, table: LayerTable, batch: int, amp: bool) -> bool:
    if device.memory_bytes is None:
        return True
    precision = Precision.BF16 if amp else Precision.FP32
    return estimate_peak_memory(table, batch, precision, Optimizer.SGD).total <= device.memory_bytes


def step_estimate(grid: Grid, device: DeviceProfile, table: LayerTable, config: StepConfig) -> float:
    """Seconds to measure one step configuration: building it, then every warm-up and timed step."""
    flops = table.total_at(config.batch).train_flops
    speed = device.flops_per_s * (device.amp_speedup if config.amp else 1.0)
    # CPUs take one more step, untimed, to track memory (see ``measure``).
    passes = grid.warmup + grid.steps + (device.kind == "cpu")
    return device.item_overhead_s + passes * (flops / speed + device.step_overhead_s)


def layer_estimate(grid: Grid, device: DeviceProfile, layer: Layer | None, config: LayerConfig) -> float:
    """Seconds to measure one layer configuration (of a zoo layer, else None): each warm-up and repeat."""
    speed = device.flops_per_s * (device.amp_speedup if config.amp else 1.0)
    return _micro_s(grid, device, layer_costs(config, layer)[0] / speed)


def _micro_s(grid: Grid, device: DeviceProfile, run_s: float) -> float:
    """A micro-benchmark of ``run_s`` a run: set up, paced before and after (a CPU), every repeat."""
    per_repeat = run_s + device.layer_overhead_s
    return device.layer_item_overhead_s + 2 * device.pace_s + (grid.warmup + grid.repeats) * per_repeat
