"""The replay's step times as the daemon takes them (`advisor.daemon.step_times`): one file for every arm
that advises, in the simulator and through a running daemon alike.

Arm C's curves are its learned models' predictions (`benchmarks.harness.predictor`), the oracle's the
measured truth (`benchmarks.harness.truth`), each at every micro-batch a candidate of the workload's jobs
can ask for (the divisors of a global batch shared by up to `MAX_DEVICES` devices, and 1): the daemon's
linear interpolation is never needed, so its answers are the models' own. The measured range of a
placement bounds the curve as before: above it nothing fits, below it the time is an extrapolation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from advisor.daemon.step_times import StepCurve, StepPoint, StepTimes
from benchmarks.harness.model import Arrival
from benchmarks.harness.predictor import StepModels
from benchmarks.harness.truth import StepTable

MAX_DEVICES = 64
"""The most devices a candidate spreads a job over (the replayed jobs ask for at most 16)."""

Times = Callable[[str, str, int, int, int], tuple[float, float]]
"""(application, GPU type, GPUs in all, nodes, micro-batch) -> (p50, p90) of one micro-step."""


def asked_batches(arrivals: Iterable[Arrival]) -> dict[str, list[int]]:
    """Per application, the micro-batches a candidate can have: every divisor of its global batch over
    1 to `MAX_DEVICES` devices, and 1 (what the recommender asks a device's largest batch with)."""
    found: dict[str, set[int]] = {}
    for arrival in arrivals:
        batches = found.setdefault(arrival.application, {1})
        for devices in range(1, MAX_DEVICES + 1):
            per_device = arrival.global_batch // devices
            batches.update(d for d in range(1, per_device + 1) if per_device % d == 0)
    return {application: sorted(batches) for application, batches in found.items()}


def learned_times(models: StepModels, arrivals: Sequence[Arrival], made_at: datetime) -> StepTimes:
    """Arm C's step times: the models trained without the workload's batches, where they saw the placement."""
    batches = asked_batches(arrivals)
    placements = []
    for gpu_type, machine in models.machines.items():
        seen = [(key, curve) for key, curve in machine.curves.items() if key[0] in batches]
        models.predict_all(gpu_type, [(*key, batch) for key, _ in seen for batch in batches[key[0]]])
        placements += [(app, gpu_type, gpus, nodes, c.low, c.high) for (app, gpus, nodes), c in seen]
    return _times(placements, models.predict, arrivals, made_at)


def true_times(table: StepTable, arrivals: Sequence[Arrival], made_at: datetime) -> StepTimes:
    """The oracle's step times: the truth, p90 equal to p50; outside a measured range, its nearest end."""
    placements = []
    for application in {arrival.application for arrival in arrivals}:
        for gpu_type in sorted(table.gpu_types()):
            for gpus, nodes in sorted(table.placements(application, gpu_type)):
                seen = table.batch_range(application, gpu_type, gpus, nodes)
                if seen is not None:
                    placements.append((application, gpu_type, gpus, nodes, *seen))

    def truth(application: str, gpu_type: str, gpus: int, nodes: int, batch: int) -> tuple[float, float]:
        low, high = table.batch_range(application, gpu_type, gpus, nodes) or (batch, batch)
        step = table.micro_step_s(application, gpu_type, gpus, nodes, min(max(batch, low), high))
        assert step is not None, "a batch within a measured curve has a time"
        return step, step

    return _times(placements, truth, arrivals, made_at)


def _times(
    placements: Iterable[tuple[str, str, int, int, int, int]],
    times: Times,
    arrivals: Sequence[Arrival],
    made_at: datetime,
) -> StepTimes:
    """A curve per placement of an application the workload runs; Sia's GPUs are counted over all nodes,
    the daemon's per node (a placement that does not split evenly is one no candidate asks for)."""
    batches = asked_batches(arrivals)
    curves = [
        StepCurve(
            model=application,
            gpu_type=gpu_type,
            gpus_per_node=gpus // nodes,
            nodes=nodes,
            smallest_measured=low,
            largest_fits=high,
            points=[
                StepPoint(micro_batch=batch, step_s=p50, step_p90_s=max(p90, p50))
                for batch in batches[application]
                for p50, p90 in [times(application, gpu_type, gpus, nodes, batch)]
            ],
        )
        for application, gpu_type, gpus, nodes, low, high in sorted(placements)
        if application in batches and gpus % nodes == 0
    ]
    return StepTimes(made_at=made_at, curves=curves)
