"""What the communication benchmark writes, one JSON line each: an all-reduce, or a whole data-parallel
step; read back with every bad line named by its file and line."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from advisor.bench.results import complete_lines
from advisor.comm.sync import AllReduceSample, Spread, WholeStep


class _Measured(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    partition: str
    machine: str
    network: str
    """The backend and the nodes it ran between (``gloo a100-[1-2]``): which links were measured."""
    measured_at: datetime
    spread: Spread


class AllReduceLine(_Measured):
    kind: Literal["allreduce"] = "allreduce"
    bytes: int = Field(ge=1)
    seconds: float = Field(gt=0)

    def sample(self) -> AllReduceSample:
        return AllReduceSample(spread=self.spread, bytes=self.bytes, seconds=self.seconds)


class WholeStepLine(_Measured):
    kind: Literal["whole_step"] = "whole_step"
    model: str
    batch: int = Field(ge=1)
    input_size: int = Field(ge=1)
    gradient_bytes: int = Field(ge=0)
    compute_s: float = Field(gt=0)
    step_s: float = Field(gt=0)

    def step(self) -> WholeStep:
        return WholeStep(
            spread=self.spread,
            gradient_bytes=self.gradient_bytes,
            compute_s=self.compute_s,
            step_s=self.step_s,
        )


CommLine = Annotated[AllReduceLine | WholeStepLine, Field(discriminator="kind")]
_LINE: TypeAdapter[AllReduceLine | WholeStepLine] = TypeAdapter(CommLine)


def read_comm_lines(path: Path) -> list[AllReduceLine | WholeStepLine]:
    """Every complete line of ``path`` (`complete_lines`: a line cut short by a killed writer is dropped)."""
    found = []
    for number, line in enumerate(complete_lines(path), start=1):
        try:
            found.append(_LINE.validate_json(line))
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ValueError(f"{path}:{number}: {where}: {first['msg']}") from None
    return found
