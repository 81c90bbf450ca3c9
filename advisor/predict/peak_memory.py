"""A machine's peak-memory predictor: the measured peak as a weighted sum of the introspection's estimate's
terms, fitted per machine (`advisor.predict.machine.fit_memory`), on one of the job's GPUs."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

from advisor.introspect import LayerTable, Optimizer, estimate_peak_memory
from advisor.precision import Precision


class MemoryFit(BaseModel):
    """The measured peak as a weighted sum of introspection's terms: state, activations, a transient layer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    coefficients: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 0.0)

    def predict(self, table: LayerTable, batch: int, amp: bool, devices: int = 1) -> float:
        """Bytes on one of ``devices`` GPUs: ZeRO and FSDP shard a job's state over them (`training`)."""
        return float(np.dot(self.coefficients, memory_terms(table, batch, amp, devices)))


def memory_terms(table: LayerTable, batch: int, amp: bool, devices: int = 1) -> list[float]:
    precision = Precision.BF16 if amp else Precision.FP32
    e = estimate_peak_memory(table, batch, precision, Optimizer.SGD, devices)
    static = e.weights + e.gradients + e.optimizer_state + e.autocast_weight_copies
    return [float(static), float(e.activations), float(e.transient), 1.0]
