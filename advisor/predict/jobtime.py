"""A whole job's time from a predicted step: pure arithmetic, so the advisor can explain every term."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class JobTime(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    p50_s: float
    p90_s: float


class JobShape(BaseModel):
    """How a job spends its time around the training steps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: int = Field(ge=0)
    """Optimizer steps."""
    accumulation: int = Field(default=1, ge=1)
    """Micro-steps per optimizer step."""
    optimizer_s: float = Field(default=0.0, ge=0)
    """The optimizer update inside one measured step, paid once per accumulated step; 0 is conservative."""
    epochs: int = Field(default=0, ge=0)
    epoch_overhead_s: float = Field(default=0.0, ge=0)
    """Evaluation, checkpointing, re-starting loader workers."""
    startup_s: float = Field(default=0.0, ge=0)


def job_time(step_s: float, step_p90_s: float, shape: JobShape) -> JobTime:
    """A measured step holds one forward, backward and update; accumulating k micro-batches pays k
    forward-backward passes and one update. Model error is systematic across a job's steps, so the p90
    scales with the step count instead of shrinking like independent noise would."""

    def total(micro_s: float) -> float:
        k = shape.accumulation
        optimizer_s = min(shape.optimizer_s, micro_s)
        per_step = k * micro_s - (k - 1) * optimizer_s
        return shape.startup_s + shape.epochs * shape.epoch_overhead_s + shape.steps * per_step

    return JobTime(p50_s=total(step_s), p90_s=total(max(step_p90_s, step_s)))
