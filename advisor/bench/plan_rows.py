"""A plan as ``advisor bench plan`` shows it: one row per phase, what it measures, how long, and its share."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from advisor.bench.plan import DeviceKind, Phase, Plan, PlanItem, nightly_grid
from advisor.ops import op_of
from advisor.records import LayerConfig, StepConfig


class PlanRow(BaseModel):
    """One phase of a plan as ``advisor bench plan`` shows it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    phase: Phase
    kind: Literal["step", "layer", "grid layer", "sweep"]
    """A grid layer is one no zoo model has, the grid's own (`Grid.own_layers`), shown apart."""
    items: int
    subjects: tuple[str, ...]
    """Models for steps; layer ops (depthwise and grouped convolutions apart, a grid layer's convolutions by
    kernel) for layers, grid layers and sweeps."""
    sizes: tuple[int, ...]
    """Input sides for steps, map sides of a grid layer's convolutions; for sweeps, what is swept
    (`sweep_size`); none for layers."""
    batches: tuple[int, ...]
    settings: tuple[str, ...]
    estimate_s: float
    share: float
    """Of the plan's estimated seconds."""


SWEPT = (Phase.BANDWIDTH, Phase.LAUNCHES, Phase.UPDATES)
"""The phases that measure what is not compute (`advisor.bench.sweeps`)."""


def sweep_size(phase: Phase, config: LayerConfig) -> int:
    """What a sweep varies: a memory-bound op's tensor elements, the launch chain's length, the update's
    parameters."""
    if phase is Phase.LAUNCHES:
        return config.height
    if phase is Phase.UPDATES:
        return config.height * config.width
    return config.in_channels * config.height * config.width


_OWN = frozenset(config for kind in get_args(DeviceKind) for config in nightly_grid(kind).own_layers)


def _own(item: PlanItem) -> bool:
    """One of the nightly grids' own layers (`Grid.own_layers`), at any batch."""
    config = item.config
    if isinstance(config, StepConfig):
        return False
    return config.model_copy(update={"batch": 1, "amp": False, "cudnn_benchmark": True}) in _OWN


def describe(plan: Plan) -> list[PlanRow]:
    """One row a phase, a layer phase's grid layers in a row of their own."""
    rows: list[PlanRow] = []
    for phase in Phase:
        items = [item for item in plan.items if item.phase is phase]
        for own in (False, True):
            group = [item for item in items if _own(item) is own]
            if group:
                rows.append(_row(phase, group, plan.estimate_s))
    return rows


def _row(phase: Phase, items: list[PlanItem], total_s: float) -> PlanRow:
    subjects: dict[str, None] = {}
    sizes: set[int] = set()
    settings: set[str] = set()
    for item in items:
        config = item.config
        if isinstance(config, StepConfig):
            subjects[config.model] = None
            sizes.add(config.input_size)
            flags = {"amp": config.amp, "channels_last": config.channels_last, "pinned": config.pinned}
        else:
            subjects[_layer_op(config, _own(item))] = None
            if phase in SWEPT:
                sizes.add(sweep_size(phase, config))
            elif _own(item) and op_of(config).family != "matrix":
                sizes.add(config.height)
            flags = {"amp": config.amp, "cudnn_benchmark": config.cudnn_benchmark}
        if phase not in SWEPT:  # a sweep does not vary them (FP32, cuDNN benchmark mode on)
            settings.update(f"{name}={'on' if value else 'off'}" for name, value in flags.items())
    estimate_s = sum(item.estimate_s for item in items)
    return PlanRow(
        phase=phase,
        kind=_kind(phase, items[0]),
        items=len(items),
        subjects=tuple(subjects),
        sizes=tuple(sorted(sizes)),
        batches=tuple(sorted({item.config.batch for item in items})),
        settings=tuple(sorted(settings)),
        estimate_s=estimate_s,
        share=estimate_s / total_s if total_s else 0.0,
    )


def _kind(phase: Phase, item: PlanItem) -> Literal["step", "layer", "grid layer", "sweep"]:
    if isinstance(item.config, StepConfig):
        return "step"
    return "sweep" if phase in SWEPT else "grid layer" if _own(item) else "layer"


def _layer_op(config: LayerConfig, own: bool) -> str:
    """The op as a row names it: a grid layer's convolution with its kernel ("grouped conv2d 3x3"), and
    its input's layout where channels last."""
    kind = "depthwise " if config.depthwise else "grouped " if config.grouped else ""
    op = f"{kind}{config.op}"
    if own and op_of(config).family != "matrix":
        op = f"{op} {config.kernel[0]}x{config.kernel[1]}"
    return f"{op} channels-last" if config.channels_last else op
