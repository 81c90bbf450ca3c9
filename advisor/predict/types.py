"""What a prediction is, apart from how it is made: plain values the pure core may import without loading
the store, the model files or xgboost (`advisor.predict.service` makes them). `Confidence` is declared once,
in the policy (`advisor.policy.schema`), whose threshold is one of its levels."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from advisor.policy.schema import Confidence

Evidence = Literal["measured", "interpolated", "layers", "zoo", "scaled"]
"""What a prediction rests on, narrowest first: the architecture measured whole at this batch size; measured
whole at other batch sizes (interpolated); its own layers measured; the zoo only (an unseen architecture);
scaled from another GPU by roofline (its machine was never benchmarked)."""


class NoModelError(LookupError):
    """No machine has a trained predictor: run ``advisor models train`` first."""


class Prediction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    partition: str
    machine: str
    model_version: int
    batch_size: int
    amp: bool
    channels_last: bool
    step_s: float
    step_p90_s: float
    peak_memory_bytes: int
    memory_bytes: int | None
    """The device's memory; None on a CPU, whose host memory the fingerprint does not record."""
    fits: bool
    largest_batch: int | None
    confidence: Confidence
    """Read off the band's p90/p50 (`advisor.predict.bands.confidence_of`); low when scaled."""
    evidence: Evidence | None = None
    """What the prediction rests on; None from a predictor that does not say."""
    step_p10_s: float | None = None
    calibration: float = 1.0
    """The machine's correction from finished jobs, already applied to the step times."""
    scaled_from: str | None = None
    note: str | None = None

    @property
    def calibration_key(self) -> str:
        """Finished jobs correct the machine that made the prediction; a scaled one, its own partition."""
        return self.machine if self.scaled_from is None else f"scaled:{self.partition}"
