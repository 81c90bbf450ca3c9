"""A machine's peak-memory predictor, on one of the job's GPUs: the larger of the end of the forward, the
introspection's estimate's terms weighted as fitted per machine (`fit_peak_memory`, through
`advisor.predict.machine.fit_memory`), and the optimizer's update, counted as it is (weights, gradients,
optimizer state and the update's temporaries: `advisor.introspect.memory`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from advisor.introspect import LayerTable, MemoryEstimate, Optimizer, estimate_peak_memory
from advisor.introspect.memory import OptimizerUpdate
from advisor.precision import Precision

MemoryStep = tuple[LayerTable, int, bool]
"""A measured step's model, micro-batch and whether it ran under autocast."""
MEMORY_MARGIN = 0.1
"""A configuration fits when its predicted peak plus this share stays within the device's memory."""
_MAX_BATCH = 1 << 20
_UPDATE_SHARE = 0.01
"""A measured peak within this share of the update's is the update's: no evidence on the forward's."""


class MemoryFit(BaseModel):
    """The forward's peak as a weighted sum of introspection's terms (state, activations, a transient layer,
    a constant) or the update's, whichever is larger."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    coefficients: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 0.0)
    update: OptimizerUpdate = OptimizerUpdate.FOREACH
    """How the machine's torch applies the optimizer's update (its temporaries), read off its peaks."""

    def predict(self, table: LayerTable, batch: int, amp: bool, devices: int = 1) -> float:
        """Bytes on one of ``devices`` GPUs: ZeRO and FSDP shard a job's state over them (`training`)."""
        estimate = _estimate(table, batch, amp, devices, self.update)
        forward = float(np.dot(self.coefficients, memory_terms(estimate)))
        return max(forward, float(estimate.update_peak))

    def largest_batch(self, table: LayerTable, amp: bool, capacity_bytes: int, devices: int = 1) -> int:
        """The largest micro-batch whose predicted peak, plus the margin, fits; 0 when none does."""

        def fits(batch: int) -> bool:
            return self.predict(table, batch, amp, devices) * (1 + MEMORY_MARGIN) <= capacity_bytes

        low, high = 0, _MAX_BATCH
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if fits(middle) else (low, middle - 1)
        return low


def memory_terms(estimate: MemoryEstimate) -> list[float]:
    """The end of the forward's terms: state (with autocast's weight copies), activations, transient, 1."""
    static = estimate.state + estimate.autocast_weight_copies
    return [float(static), float(estimate.activations), float(estimate.transient), 1.0]


def _estimate(
    table: LayerTable, batch: int, amp: bool, devices: int, update: OptimizerUpdate
) -> MemoryEstimate:
    precision = Precision.BF16 if amp else Precision.FP32
    return estimate_peak_memory(table, batch, precision, Optimizer.SGD, devices, update)


def fit_peak_memory(steps: Sequence[MemoryStep], peaks: Sequence[float]) -> MemoryFit:
    """For each way to apply the update, the forward's weights by least squares on relative error (a 10%
    miss on a small model matters as much as on a large one) over the steps whose peak is above the
    update's; the way whose predictions miss the peaks less is the machine's."""
    measured = np.asarray(peaks, dtype=float)
    fits: list[tuple[float, MemoryFit]] = []
    for update in (OptimizerUpdate.FOREACH, OptimizerUpdate.PER_TENSOR):
        estimates = [_estimate(table, batch, amp, 1, update) for table, batch, amp in steps]
        above = [i for i, e in enumerate(estimates) if measured[i] > e.update_peak * (1 + _UPDATE_SHARE)]
        fit = MemoryFit(update=update)
        if len(above) >= 4:
            terms = np.asarray([memory_terms(estimates[i]) for i in above]) / measured[above, None]
            solution, *_ = np.linalg.lstsq(terms, np.ones(len(above)), rcond=None)
            a, b, c, d = (float(v) for v in solution)
            fit = fit.model_copy(update={"coefficients": (a, b, c, d)})
        predicted = np.asarray([fit.predict(table, batch, amp) for table, batch, amp in steps])
        fits.append((float(np.sum((predicted / measured - 1.0) ** 2)), fit))
    return min(fits, key=lambda fit: fit[0])[1]
