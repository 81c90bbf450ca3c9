"""Plans shorter than a night: the quick plan (a smoke test of the whole path in minutes) and the check plan
(a new machine's first look at every part of a night, thinly). Pure, as `advisor.bench.plan` is."""

from __future__ import annotations

from dataclasses import replace

from advisor.bench.plan import (
    DeviceProfile,
    Grid,
    Phase,
    Plan,
    TableSource,
    build_plan,
    geometric,
    nightly_grid,
)
from advisor.bench.zoo import CHECK_MODELS, SMALL


def quick_plan(tables: TableSource, device: DeviceProfile | None = None) -> Plan:
    """Small models on CIFAR-sized inputs: a smoke test of the whole path that fits in a few minutes."""
    grid = Grid(
        models=("squeezenet1_1", "shufflenet_v2_x0_5", "mobilenet_v3_small", "resnet18"),
        sizes=(SMALL,),
        batches=geometric(64, 4),
        coarse=(1, 16),
        settings=(Phase.AMP,),
        # bf16 is emulated, and slow, on CPUs without native support.
        setting_batches=(1, 4),
        workers=1,
        layer_models=("resnet18",),
        layer_batches=(16,),
        steps=3,
        warmup=1,
        repeats=5,
    )
    return build_plan(grid, device or DeviceProfile.assumed("cpu"), tables)


def check_plan(device: DeviceProfile, tables: TableSource, *, workers: int = 4) -> Plan:
    """Every part of a night, thinly: a new machine's first look in minutes. The nightly grid of the
    device's kind on the twelve `CHECK_MODELS`, at its first four coarse batches, AMP and channels_last
    at batch 16 (pinned memory is `benchmarks/runtime_speedup.py`'s), the layers at two batch sizes (with
    and without cuDNN's benchmark mode on a GPU), five timed steps in three repeats."""
    grid = nightly_grid(device.kind, workers=workers)
    coarse = grid.coarse[:4]
    models = tuple(name for name in CHECK_MODELS if name in grid.models)
    thin = replace(
        grid,
        models=models,
        layer_models=models,
        batches=coarse,
        coarse=coarse,
        settings=tuple(phase for phase in grid.settings if phase is not Phase.PINNED),
        setting_batches=(16,) if grid.settings else (),
        layer_batches=grid.layer_batches[:2],
        steps=5,
        warmup=2,
        repeats=3,
        sweeps=grid.sweeps.thin(),
    )
    return build_plan(thin, device, tables)
