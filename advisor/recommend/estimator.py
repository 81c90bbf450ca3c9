"""What a recommendation estimates with, and how: the edges it is handed (`Context`: the policy, the
cluster's partitions, a wait estimator; a `StepPredictor` for the job) and the `Estimator` that turns each
candidate into an `Estimate` (its run at p50 and p90, the time limit it would get, its wait and cost), asking
each model's age once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from advisor.comm.sync import Spread
from advisor.jobscript.advisor_lines import JobDescription
from advisor.policy.resolve import Effective
from advisor.policy.schema import Policy
from advisor.predict.calibration import start_up_and_epoch
from advisor.predict.jobtime import JobShape, job_time
from advisor.predict.types import NoModelError, Prediction
from advisor.recommend.arrays import ArrayShape, ArraySpecError, array_figures, parse_array, side_by_side
from advisor.recommend.ask import Ask
from advisor.recommend.candidates import Candidate, epochs, optimizer_steps
from advisor.recommend.choose import Estimate
from advisor.recommend.kills import likely_killed, outlasts
from advisor.recommend.placement import cpus_per_node
from advisor.slurm.models import Partition
from advisor.wait.accuracy import WaitEstimate
from advisor.wait.snapshot import SlotRequest


class StepPredictor(Protocol):
    """What the recommender asks about one job: its steps on each partition and when a model was made.

    Asked once per candidate, so many times for the same step: an implementation keeps what is costly to
    compute. May raise `NoModelError`: nothing to predict with, and the job stays as submitted.
    """

    def step(
        self, partition: str, gpus: int, nodes: int, micro_batch: int, amp: bool, channels_last: bool
    ) -> Prediction:
        """One micro-step of ``micro_batch`` samples on each of ``gpus`` devices on each of ``nodes``
        (0 GPUs: a CPU partition)."""
        ...

    def sync(self, partition: str, spread: Spread, micro_step_s: float) -> Sync:
        """What the gradient all-reduce adds to each optimizer step beyond its last micro-step (a
        ``micro_step_s`` long backward hides part of it), and whether the partition measured it."""
        ...

    def trained_at(self, machine: str, version: int) -> datetime | None:
        """When a model version was trained: the policy trusts a model only while it is young."""
        ...


@dataclass(frozen=True)
class Sync:
    added_s: float
    measured: bool
    """False: the partition never measured its communication, and the stated default was assumed."""


WaitEstimator = Callable[[Sequence[SlotRequest]], list[WaitEstimate]]
"""Both sources' waits for each candidate's resources, in order."""


@dataclass(frozen=True)
class Context:
    policy: Policy
    partitions: list[Partition]
    waits: WaitEstimator


@dataclass(frozen=True)
class _Run:
    candidate: Candidate
    prediction: Prediction
    run_s: float
    p90_s: float
    limit: timedelta
    p10_s: float | None


class Estimator:
    """One recommendation's predictions and waits; model ages are read once per model version."""

    def __init__(
        self,
        context: Context,
        effective: Effective,
        ask: Ask,
        description: JobDescription,
        predictor: StepPredictor,
        scale: float = 1.0,
    ) -> None:
        """``scale``: the level history sets the predicted runs to (`history_prior`); 1 without it."""
        request = ask.request
        self.context = context
        self.effective = effective
        self.request = request
        self.description = description
        self.predictor = predictor
        self.now = ask.now
        self.partitions = {p.name: p for p in context.partitions}
        self.overhead_s = effective.overhead.seconds(epochs(description))
        """Start-up and per-epoch work: the same on every candidate, since each keeps the job's epochs."""
        self.start_up_s = effective.overhead.startup_minutes * 60
        self._trained_at: dict[tuple[str, int], datetime | None] = {}
        self.scale = scale
        self.array = _array_shape(request.array)
        """A job array's tasks and throttle: each candidate is then costed and waited as the whole array."""

    def largest_batch(self, partition: str, amp: bool) -> int | None:
        """The largest micro-batch one device holds, as its smallest placement sees it; under ZeRO/FSDP,
        which shares a device's state among all the job's devices, as the job's own spread sees it, so a
        model too big for one GPU still gets candidates (a smaller spread's are then judged by their fit)."""
        gpus, nodes = (1 if self.partitions[partition].gpus_per_node else 0), 1
        if gpus and self.description.zero_stage:
            nodes = self.request.nodes_min or 1
            gpus = max(self.request.world_size // nodes, 1)
        return self.predictor.step(partition, gpus, nodes, 1, amp, False).largest_batch

    def estimate(self, candidates: list[Candidate]) -> list[Estimate]:
        """The first candidate (the job as submitted) must be predicted; another that cannot be (a
        placement a predictor knows nothing of) is left out."""
        first, *others = candidates
        runs = [self._run(first)]
        for candidate in others:
            with contextlib.suppress(NoModelError):
                runs.append(self._run(candidate))
        asked = {_resources(run): run for run in runs}
        keys = sorted(asked)
        waits = dict(zip(keys, self.context.waits([self._slots(asked[key]) for key in keys]), strict=True))
        return [self._estimate(run, waits[_resources(run)], self._efficiency(run)) for run in runs]

    def _slots(self, run: _Run) -> SlotRequest:
        """The resources the run's wait is asked for: the job's CPUs on each of the candidate's nodes."""
        candidate = run.candidate
        return SlotRequest(
            partitions=[candidate.partition],
            nodes=candidate.nodes,
            gpus_per_node=candidate.gpus,
            cpus_per_node=cpus_per_node(self.request),
            time_limit=run.limit,
        )

    def _efficiency(self, run: _Run) -> float | None:
        """The same micro-steps on one device (accumulated), over the devices times this run's steps."""
        candidate = run.candidate
        if candidate.devices == 1:
            return None
        alone = candidate.model_copy(
            update={"gpus": 1, "nodes": 1, "accumulation": candidate.accumulation * candidate.devices}
        )
        fixed_s = self.overhead_s * self.scale  # start-up and epochs, at the level history set
        try:
            single_s = self._run(alone).run_s - fixed_s
        except NoModelError:
            return None
        return single_s / (candidate.devices * max(run.run_s - fixed_s, 1e-9))

    def _run(self, candidate: Candidate) -> _Run:
        prediction = self.predictor.step(
            candidate.partition,
            candidate.gpus,
            candidate.nodes,
            candidate.micro_batch,
            candidate.amp,
            candidate.channels_last,
        )
        steps = optimizer_steps(self.description, candidate.global_batch)
        length = JobShape(steps=steps, accumulation=candidate.accumulation)
        whole = job_time(prediction.step_s, prediction.step_p90_s, length)
        spread = Spread(devices=candidate.devices, nodes=candidate.nodes)
        sync = self.predictor.sync(candidate.partition, spread, prediction.step_s)
        besides_s = steps * sync.added_s + self.overhead_s
        if candidate.devices > 1 and not sync.measured:
            prediction = prediction.model_copy(update={"confidence": "low", "note": _joined(prediction.note)})
        p50_s, p90_s = (whole.p50_s + besides_s) * self.scale, (whole.p90_s + besides_s) * self.scale
        low = prediction.step_p10_s
        p10_s = None if low is None else (job_time(low, low, length).p50_s + besides_s) * self.scale
        limit = self._time_limit(candidate, p90_s)
        return _Run(candidate, prediction, p50_s, p90_s, limit, p10_s)

    def predicted(self, candidate: Candidate) -> tuple[float, str]:
        """The candidate's predicted run (unscaled) and its confidence; no wait asked."""
        run = self._run(candidate)
        return run.run_s / self.scale, run.prediction.confidence

    def runs_on(self, candidate: Candidate) -> timedelta | None:
        """The time limit ``candidate`` needs, or None where its micro-batch does not fit; no wait asked."""
        run = self._run(candidate)
        return run.limit if run.prediction.fits else None

    def _time_limit(self, candidate: Candidate, p90_s: float) -> timedelta:
        partition = self.partitions[candidate.partition]
        requested = self.request.time_limit
        limit = self.effective.time_limit.limit(timedelta(seconds=p90_s), requested)
        if limit is None:
            limit = requested or partition.default_time or partition.max_time or timedelta(days=1)
        return limit if partition.max_time is None else min(limit, partition.max_time)

    def _estimate(self, run: _Run, waits: WaitEstimate, efficiency: float | None) -> Estimate:
        candidate, prediction, limit = run.candidate, run.prediction, run.limit
        terms = self.effective.partitions.get(candidate.partition)
        cpus = self.request.cpus_per_task or 1
        cpus_held = cpus if candidate.gpus == 0 else 0
        held = candidate.gpus * candidate.nodes
        cost = None if terms is None else terms.cost(held, cpus_held, run.run_s)
        notes = [prediction.note] if prediction.note else []
        if outlasts(run.p90_s, limit):
            notes.append(likely_killed(run.p90_s, limit))
        version = (prediction.machine, prediction.model_version)
        if version not in self._trained_at:  # a few model versions serve every candidate
            self._trained_at[version] = self.predictor.trained_at(*version)
        created = self._trained_at[version]
        estimate = Estimate(
            candidate=candidate,
            run_s=run.run_s,
            run_p90_s=run.p90_s,
            peak_memory_bytes=prediction.peak_memory_bytes,
            fits=prediction.fits,
            confidence=prediction.confidence,
            machine=prediction.machine,
            model_version=prediction.model_version,
            model_age=self.now - (created or self.now),
            slurm_wait_s=waits.slurm_wait_s,
            advisor_wait_s=waits.advisor_wait_s,
            wait_source=waits.preferred,
            cost=cost,
            time_limit=limit,
            note="; ".join(notes) or None,
            efficiency=efficiency,
            run_p10_s=run.p10_s,
            calibration_key=prediction.calibration_key,
            comparable_from_s=start_up_and_epoch(
                run.run_s, self.start_up_s * self.scale, epochs(self.description)
            ),
            applied_correction=prediction.calibration * self.scale,
        )
        return estimate if self.array is None else self._as_array(estimate, self.array)

    def _as_array(self, estimate: Estimate, shape: ArrayShape) -> Estimate:
        """Each task is the estimate; the array costs them all and ends with its last wave."""
        candidate = estimate.candidate
        nodes = self.partitions[candidate.partition].nodes
        fits = side_by_side(nodes, candidate.gpus, candidate.nodes, self.request.cpus_per_task or 1)
        whole = array_figures(shape, estimate.run_s, estimate.wait_s, estimate.cost, fits)
        return estimate.model_copy(update={"array": whole})


def _resources(run: _Run) -> tuple[str, int, int, timedelta]:
    """What tells one candidate's wait from another's (the job's CPUs are the same in all), in the order
    the waits are asked."""
    return run.candidate.partition, run.candidate.gpus, run.candidate.nodes, run.limit


def _array_shape(text: str | None) -> ArrayShape | None:
    """None for a single job, and for an ``--array`` value sbatch refuses (it says why itself)."""
    try:
        return None if text is None else parse_array(text)
    except ArraySpecError:
        return None


def _joined(note: str | None) -> str:
    unmeasured = "communication never measured here: a default all-reduce assumed (`advisor comm measure`)"
    return unmeasured if note is None else f"{note}; {unmeasured}"
