"""A replay's jobs: Sia's arrivals, made whole with what a workload file does not say (seeded).

A Sia workload gives arrival time, application, GPU count and global batch. A job also needs a length and
the user's habits; both are drawn here, once per seed, before any arm decides, so every arm replays the
same jobs. The length comes from Philly's durations: a job lasts what a Philly job lasted, measured on the
GPU type its user habitually asks for, and keeps that number of optimizer steps wherever it runs.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from benchmarks.harness.model import Arrival, Job
from benchmarks.harness.truth import StepTable, user_config

HOUR_S = 3600.0


class WorkloadError(ValueError):
    """A workload or duration file that cannot be read; the message names the file and line."""


class Habits(BaseModel):
    """How users behave when nobody advises them.

    ``type_shares``: which GPU type a user asks for; the newest GPU is the habit (A100 0.55, V100 0.25,
    RTX 2080Ti 0.12, T4 0.08), renormalised over the types where the user's configuration fits.
    Durations are Philly's, clipped to ``[min_duration_s, max_duration_s]``: the 12-hour cap keeps a
    compressed real-Slurm replay within minutes (Philly's tail runs for days) and bounds the mean.
    The time limit is the user's own run time times an overestimate drawn log-uniformly from
    ``[overestimate_low, overestimate_high]``, rounded up to whole hours and capped at the partition maximum.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type_shares: dict[str, float] = Field(
        default_factory=lambda: {"a100": 0.55, "v100": 0.25, "rtx": 0.12, "t4": 0.08}, min_length=1
    )
    min_duration_s: float = Field(default=60.0, gt=0)
    max_duration_s: float = Field(default=12 * HOUR_S, gt=0)
    overestimate_low: float = Field(default=1.5, ge=1)
    overestimate_high: float = Field(default=4.0, ge=1)
    partition_max_s: float = Field(default=24 * HOUR_S, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if any(share <= 0 for share in self.type_shares.values()):
            raise ValueError("type shares must be positive")
        if not self.min_duration_s <= self.max_duration_s <= self.partition_max_s:
            raise ValueError("need min_duration_s <= max_duration_s <= partition_max_s")
        if self.overestimate_low > self.overestimate_high:
            raise ValueError("need overestimate_low <= overestimate_high")
        return self


def load_arrivals(path: Path) -> list[Arrival]:
    """A Sia workload CSV: ``name,time,application,num_replicas,batch_size`` (batch_size: global batch)."""
    arrivals = []
    with path.open(newline="") as handle:
        for line, record in enumerate(csv.DictReader(handle), start=2):
            try:
                arrivals.append(
                    Arrival(
                        name=record["name"],
                        time_s=float(record["time"]),
                        application=record["application"],
                        gpus=int(record["num_replicas"]),
                        global_batch=int(record["batch_size"]),
                    )
                )
            except (KeyError, TypeError, ValueError, ValidationError) as error:
                raise WorkloadError(f"{path}:{line}: {error}") from error
    if not arrivals:
        raise WorkloadError(f"{path}: no arrivals")
    return arrivals


def load_durations(path: Path) -> np.ndarray:
    """Philly's job durations in seconds (``jobs.csv``'s ``duration``), zero-length jobs dropped.

    Not conditioned on ``num_gpus``: Philly's jobs of 4 or more GPUs are 4% of the trace and run for hours
    (median about 5 h against 19 min overall); drawing from them would make every Sia job (4-16 GPUs) hours
    long and the replay a standing queue. The workload already fixes each job's GPU count.
    """
    durations = []
    with path.open(newline="") as handle:
        for line, record in enumerate(csv.DictReader(handle), start=2):
            try:
                seconds = float(record["duration"])
            except (KeyError, TypeError, ValueError) as error:
                raise WorkloadError(f"{path}:{line}: {error!r}") from error
            if seconds > 0:
                durations.append(seconds)
    if not durations:
        raise WorkloadError(f"{path}: no durations")
    return np.asarray(durations)


def make_jobs(
    arrivals: Sequence[Arrival], table: StepTable, durations: np.ndarray, habits: Habits, seed: int
) -> list[Job]:
    """Jobs for every arrival, the same for a seed whatever the arms do: each job draws from its own
    generator (seed, position), in a fixed order: GPU type, duration, overestimate."""
    return [
        _job(arrival, table, durations, habits, np.random.default_rng([seed, index]))
        for index, arrival in enumerate(arrivals)
    ]


def user_step_times(arrival: Arrival, table: StepTable, habits: Habits) -> dict[str, float]:
    """The user's own optimizer-step time on each GPU type of the habits where their configuration runs."""
    step_s = {}
    fits = table.fits(arrival.application)
    for gpu_type in habits.type_shares:
        if gpu_type not in table.gpu_types():
            continue
        config = user_config(arrival, gpu_type, table.gpus_per_node(gpu_type), fits)
        step = None if config is None else table.optimizer_step_s(arrival.application, config)
        if step is not None:
            step_s[gpu_type] = step
    return step_s


def _job(
    arrival: Arrival, table: StepTable, durations: np.ndarray, habits: Habits, rng: np.random.Generator
) -> Job:
    step_s = user_step_times(arrival, table, habits)
    if not step_s:
        raise WorkloadError(f"{arrival.name}: its configuration fits no GPU type of the step table")
    types = sorted(step_s)
    shares = np.asarray([habits.type_shares[t] for t in types])
    gpu_type = types[int(rng.choice(len(types), p=shares / shares.sum()))]
    length = rng.choice(durations) if arrival.duration_s is None else arrival.duration_s
    duration = float(np.clip(length, habits.min_duration_s, habits.max_duration_s))
    steps = max(1, round(duration / step_s[gpu_type]))
    log_low, log_high = math.log(habits.overestimate_low), math.log(habits.overestimate_high)
    overestimate = math.exp(rng.uniform(log_low, log_high))
    hours = math.ceil(steps * step_s[gpu_type] * overestimate / HOUR_S)
    return Job(
        arrival=arrival,
        steps=steps,
        user_gpu_type=gpu_type,
        user_limit_s=min(hours * HOUR_S, habits.partition_max_s),
    )
