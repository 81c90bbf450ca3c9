"""What a benchmark run measures, as it travels from a Slurm job (JSON lines) into the database.

Pure data: the benchmark writes these, `advisor bench submit` ingests them, the predictors read them.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.frozen import LaterFields


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def key(self) -> str:
        """A stable identity, so ingesting the same line twice stores one row."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:32]


class Fingerprint(_Record, LaterFields):
    """The machine a measurement belongs to; predictors are trained per fingerprint (machine type)."""

    partition: str | None
    node: str
    device: Literal["cpu", "cuda"]
    gpu_name: str | None
    gpu_count: int
    gpu_memory_mb: int | None
    driver: str | None
    cuda: str | None
    cudnn: str | None
    cpu_model: str
    cpu_cores: int
    """Cores the benchmark used (its torch threads), not the node's total."""
    torch: str
    cpu_quota: float | None = None
    """The CPUs its CPU cgroup may use, where a quota caps it (the sandbox's slow nodes); absent where none
    does, so fingerprints from before the field keep their identity."""
    later_fields = ("cpu_quota",)

    def machine(self) -> str:
        """The machine type: what stays equal across nodes of one partition and across nights."""
        parts = [self.device, self.gpu_name or self.cpu_model, f"{self.gpu_count or self.cpu_cores}"]
        if self.cpu_quota is not None:
            parts.append(f"quota {self.cpu_quota:g}")
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


class StepConfig(_Record):
    """One whole-model training step configuration."""

    model: str
    input_size: int
    batch: Annotated[int, Field(ge=1)]
    amp: bool
    channels_last: bool
    pinned: bool
    workers: Annotated[int, Field(ge=0)]


class StepMeasurement(_Record):
    kind: Literal["step"] = "step"
    config: StepConfig
    arch_hash: str
    steps: int
    """Training steps timed: a short paced step is timed in groups (``measure.GROUP_S``)."""
    median_s: float | None
    """None when the configuration does not fit."""
    non_device_share: float | None
    """Share of the step spent outside device compute (data loading, copies, Python)."""
    peak_memory_bytes: int | None
    fits: bool
    error: str | None = None
    pace_ratio: float | None = None
    """Median of each step's time over the pace step's around it; None where the step was not paced."""
    pace_s: float | None = None
    """Median time of the pace step during this measurement: the machine's pace then."""


class LayerConfig(_Record, LaterFields):
    """One op micro-benchmark configuration: each op's entry in the registry (`advisor.ops.known`) says how
    it reads these fields (a convolution's are its own; depthwise and grouped apart from dense by
    ``groups``)."""

    op: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    """The configuration's op name in the registry (``conv2d`` for dense, grouped and depthwise alike)."""
    in_channels: int
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    height: int
    width: int
    batch: Annotated[int, Field(ge=1)]
    amp: bool
    cudnn_benchmark: bool
    channels_last: bool = False
    """A convolution's input as its network hands it on: channels last in memory (ConvNeXt's depthwise 7x7
    after its block's permute), which oneDNN runs on other kernels: on this project's CPU 768 channels or
    more take 6-10 times as long through the backward (benchmarks/README.md). Absent where unset, so
    configurations from before the field keep their identity."""
    later_fields = ("channels_last",)

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.in_channels

    @property
    def grouped(self) -> bool:
        return self.groups > 1 and not self.depthwise


class LayerMeasurement(_Record):
    kind: Literal["layer"] = "layer"
    config: LayerConfig
    median_s: float | None
    fits: bool
    error: str | None = None
    pace_ratio: float | None = None
    """The median time over the pace step's just before and after; None where it was not paced."""
    pace_s: float | None = None


class ResultLine(_Record):
    """One line of a run's JSON-lines output: written and flushed as soon as it is measured."""

    run_id: str
    fingerprint: Fingerprint
    measured_at: datetime
    measurement: Annotated[StepMeasurement | LayerMeasurement, Field(discriminator="kind")]


class StepPart(StrEnum):
    """What each term of the step's linear base (`StepFeatures.base_terms`) stands for, in its order."""

    LAYERS = "convolutions and linears"
    DISPATCH = "per-op dispatch"
    OPTIMIZER = "optimizer"
    MEMORY_BOUND = "memory-bound ops"
