"""A plan as ``advisor bench plan`` shows it: one row per phase, what it measures and how long."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from advisor.bench.plan import Phase, Plan, PlanItem
from advisor.records import LayerConfig, StepConfig


class PlanRow(BaseModel):
    """One phase of a plan as ``advisor bench plan`` shows it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    phase: Phase
    kind: Literal["step", "layer"]
    items: int
    subjects: tuple[str, ...]
    """Models for steps; layer ops (depthwise and grouped convolutions apart) for layers."""
    sizes: tuple[int, ...]
    batches: tuple[int, ...]
    settings: tuple[str, ...]
    estimate_s: float


def describe(plan: Plan) -> list[PlanRow]:
    rows: list[PlanRow] = []
    for phase in Phase:
        items = [item for item in plan.items if item.phase is phase]
        if items:
            rows.append(_row(phase, items))
    return rows


def _row(phase: Phase, items: list[PlanItem]) -> PlanRow:
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
            subjects[_layer_op(config)] = None
            flags = {"amp": config.amp, "cudnn_benchmark": config.cudnn_benchmark}
        settings.update(f"{name}={'on' if value else 'off'}" for name, value in flags.items())
    return PlanRow(
        phase=phase,
        kind="step" if isinstance(items[0].config, StepConfig) else "layer",
        items=len(items),
        subjects=tuple(subjects),
        sizes=tuple(sorted(sizes)),
        batches=tuple(sorted({item.config.batch for item in items})),
        settings=tuple(sorted(settings)),
        estimate_s=sum(item.estimate_s for item in items),
    )


def _layer_op(config: LayerConfig) -> str:
    if config.depthwise:
        return f"depthwise {config.op}"
    return f"grouped {config.op}" if config.grouped else config.op
