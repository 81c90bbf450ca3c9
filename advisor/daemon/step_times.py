"""Step times handed to the daemon (``advisor daemon --step-times FILE``): an evaluation's step predictor.

A replay of a published trace (`benchmarks/replay.py`) knows its jobs' step times from that trace's
measurements, not from layer tables the stored models could read (Sia's bert, deepspeech2 or yolov3 have no
torchvision table). Started with such a file, the daemon predicts a job whose ``#ADVISOR --model`` the file
names from the file's curves (`MeasuredSteps`), and every other job as it always does. The file is data:
JSON read into `StepTimes` (pydantic, strict); nothing in it is imported or run, so it can bring no user code.

Each curve is one model on one GPU type and placement: step times (p50 and p90 of one micro-step) at some
micro-batches, linear between them and the nearest one's outside. A micro-batch above ``largest_fits`` does
not fit; one below ``smallest_measured`` is an extrapolation (low confidence: the policy never applies it).
Measured step times include their placement's all-reduce, so communication adds nothing to them. The
recommender asks one GPU of every partition it may offer for its largest batch: a file gives each such
partition's one-GPU curve of a model, or the job is kept as written ("nothing to predict with").
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Self

from pydantic import AwareDatetime, ConfigDict, Field, ValidationError, model_validator

from advisor.comm.sync import Spread
from advisor.frozen import Frozen
from advisor.predict.bands import confidence_of
from advisor.predict.types import NoModelError, Prediction
from advisor.recommend.estimator import Sync
from advisor.slurm.models import Partition

MACHINE = "measured"
"""The predictions' machine is ``measured:GPU_TYPE``: apart from any stored model's."""


class _Given(Frozen):
    """Read strictly: a number where a number is due, never a string that looks like one."""

    model_config = ConfigDict(strict=True)


class StepPoint(_Given):
    micro_batch: Annotated[int, Field(ge=1)]
    step_s: Annotated[float, Field(gt=0)]
    step_p90_s: Annotated[float, Field(gt=0)]

    @model_validator(mode="after")
    def _p90_not_below_p50(self) -> Self:
        if self.step_p90_s < self.step_s:
            raise ValueError(f"step_p90_s {self.step_p90_s} is below step_s {self.step_s}")
        return self


class StepCurve(_Given):
    model: Annotated[str, Field(min_length=1)]
    """The word a job's ``#ADVISOR --model`` gives."""
    gpu_type: Annotated[str, Field(min_length=1)]
    gpus_per_node: Annotated[int, Field(ge=1)]
    nodes: Annotated[int, Field(ge=1)]
    smallest_measured: Annotated[int, Field(ge=1)]
    largest_fits: Annotated[int, Field(ge=1)]
    points: Annotated[list[StepPoint], Field(min_length=1)]

    @model_validator(mode="after")
    def _points_in_order(self) -> Self:
        batches = [point.micro_batch for point in self.points]
        if batches != sorted(set(batches)):
            raise ValueError("points must be in increasing micro_batch, each batch once")
        return self

    def step_s(self, micro_batch: int) -> tuple[float, float]:
        """(p50, p90) at ``micro_batch``: linear between the two points around it, the nearest outside."""
        batches = [point.micro_batch for point in self.points]
        index = bisect_left(batches, micro_batch)
        if index < len(batches) and batches[index] == micro_batch:
            point = self.points[index]
            return point.step_s, point.step_p90_s
        if index in (0, len(batches)):
            point = self.points[min(index, len(batches) - 1)]
            return point.step_s, point.step_p90_s
        low, high = self.points[index - 1], self.points[index]
        share = (micro_batch - low.micro_batch) / (high.micro_batch - low.micro_batch)
        return (
            low.step_s + share * (high.step_s - low.step_s),
            low.step_p90_s + share * (high.step_p90_s - low.step_p90_s),
        )


class StepTimes(_Given):
    made_at: AwareDatetime
    """When the step times were measured or predicted: the policy trusts them while young, as it does a
    trained model (``max_model_age_days``)."""
    curves: list[StepCurve]

    def models(self) -> frozenset[str]:
        return frozenset(curve.model for curve in self.curves)


class StepTimesError(ValueError):
    """A step-time file that cannot serve; the message names the file and the place in it."""


def load_step_times(path: Path) -> StepTimes:
    try:
        return StepTimes.model_validate_json(path.read_bytes())
    except OSError as error:
        raise StepTimesError(f"{path}: cannot read: {error.strerror}") from error
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(map(str, first["loc"])) or "the file"
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        raise StepTimesError(f"{path}: {where}: {first['msg']}{more}") from error


class MeasuredSteps:
    """The `StepPredictor` of one model over a `StepTimes`."""

    def __init__(self, times: StepTimes, model: str, partitions: Sequence[Partition]) -> None:
        self.model = model
        self.made_at = times.made_at
        self.gpu_types = {p.name: p.gpu_type for p in partitions}
        self.curves = {(c.gpu_type, c.gpus_per_node, c.nodes): c for c in times.curves if c.model == model}

    def step(
        self, partition: str, gpus: int, nodes: int, micro_batch: int, amp: bool, channels_last: bool
    ) -> Prediction:
        gpu_type = self.gpu_types.get(partition)
        curve = self.curves.get((gpu_type or "", gpus, nodes))
        if gpu_type is None or curve is None:
            where = f"{gpus} {gpu_type or 'CPU'} GPUs on each of {nodes} node{'s' if nodes > 1 else ''}"
            raise NoModelError(f"no {self.model} step times given for {where}")
        p50, p90 = curve.step_s(micro_batch)
        measured = micro_batch >= curve.smallest_measured
        return Prediction(
            partition=partition,
            machine=f"{MACHINE}:{gpu_type}",
            model_version=1,
            batch_size=micro_batch,
            amp=amp,
            channels_last=channels_last,
            step_s=p50,
            step_p90_s=p90,
            peak_memory_bytes=0,
            memory_bytes=None,
            fits=micro_batch <= curve.largest_fits,
            largest_batch=curve.largest_fits,
            confidence=confidence_of(p90 / p50) if measured else "low",
            note=None if measured else f"below the smallest batch measured ({curve.smallest_measured})",
        )

    def sync(self, partition: str, spread: Spread, micro_step_s: float) -> Sync:
        return Sync(added_s=0.0, measured=True)

    def trained_at(self, machine: str, version: int) -> datetime | None:
        return self.made_at
