"""The served step time: today's step model (`advisor.predict.machine`) and the op sum
(`advisor.predict.opsum`) blended, each prediction their weighted geometric mean, the weight on today's in
twentieths. Where the two err in opposite directions the blend errs less than either, and only the blend
met issue 51's held-out goals (benchmarks/README.md). The weight is fitted on held-out steps
(`advisor.predict.heldout.fit_served`); at weight 1 (today's alone, as where the op sum cannot be fitted)
a prediction is exactly today's. Pure: the model file holds what the op sum adds (`StoredOpSum`), and the
op sum is rebuilt on the model's own layer part."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import exp, log
from statistics import mean

from advisor.introspect import LayerTable
from advisor.predict.machine import MachineModel
from advisor.predict.opsum import OpSumModel
from advisor.predict.stored_opsum import StoredOpSum
from advisor.records import StepPart

WEIGHTS = tuple(i / 20 for i in range(21))
"""The weights on today's a fit chooses from: twentieths, as finer steps fit the held-out steps' noise."""


@dataclass(frozen=True)
class PairedStep:
    """One held-out step: its measured seconds and both step models' predictions of it."""

    measured_s: float
    today_s: float
    op_sum_s: float


def weighted(today_s: float, op_sum_s: float, weight: float) -> float:
    """The weighted geometric mean, ``weight`` on today's; today's itself, exactly, at weight 1."""
    if weight == 1.0:
        return today_s
    return exp(weight * log(today_s) + (1 - weight) * log(op_sum_s))


def best_weight(steps: Sequence[PairedStep]) -> float:
    """The weight (`WEIGHTS`) whose blend errs least on ``steps`` (mean relative error), the first if tied."""

    def error(weight: float) -> float:
        return mean(abs(weighted(s.today_s, s.op_sum_s, weight) - s.measured_s) / s.measured_s for s in steps)

    return min(WEIGHTS, key=error)


def stored(op_sum: OpSumModel) -> StoredOpSum:
    """What a model file keeps of a fitted op sum, its layer part being the model's own."""
    return StoredOpSum(
        coefficients=op_sum.coefficients,
        calibration=tuple(sorted(op_sum.calibration.items())),
        booster=op_sum.booster,
        own_scales=tuple(sorted(op_sum.own_scales.items())),
        anchored_scale=op_sum.anchored_scale,
    )


def opsum_of(model: MachineModel) -> OpSumModel | None:
    """The op sum ``model`` holds, on its own layer part and roofline; None where it holds none."""
    found, rates = model.op_sum, model.roofline
    if found is None or rates is None:
        return None
    return OpSumModel(
        layers=model,
        rates=rates,
        coefficients=found.coefficients,
        calibration=dict(found.calibration),
        booster=found.booster,
        own_scales=dict(found.own_scales),
        anchored_scale=found.anchored_scale,
    )


def served_opsum(model: MachineModel) -> OpSumModel | None:
    """The op sum ``model``'s served prediction blends in; None where it serves today's alone (weight 1,
    or no op sum held)."""
    return opsum_of(model) if model.blend_weight < 1.0 else None


def blended_seconds(
    model: MachineModel, today_s: float, table: LayerTable, batch: int, amp: bool, channels_last: bool
) -> float:
    """Today's prediction ``today_s`` blended with the op sum's at ``model``'s weight."""
    op_sum = served_opsum(model)
    if op_sum is None:
        return today_s
    return weighted(today_s, op_sum.step_seconds(table, batch, amp, channels_last), model.blend_weight)


def blended_split(
    model: MachineModel, table: LayerTable, batch: int, amp: bool, channels_last: bool
) -> dict[StepPart, float] | None:
    """The op sum's split of its prediction (its terms are what each class of ops costs, where today's
    linear base is a regression); None where ``model`` serves today's alone."""
    op_sum = served_opsum(model)
    return None if op_sum is None else op_sum.parts(table, batch, amp, channels_last)
