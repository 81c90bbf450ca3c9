"""The replay twin's scheduling rules against the sandbox's Slurm, one small scene each: the same jobs, at
the same times, on a two-node partition in real seconds; prints each job's start and end in both.

    python -m benchmarks.twin_probe

Scenes: ``whole-node`` (a pending two-node job's later slot holds its nodes whole: a one-node job that
would fit beside its share of a node, and would run past the slot's start, waits) and ``blocked-head`` (a
one-node job that needs the node a two-node job's slot holds waits for it). A run takes about a minute a
scene (the sandbox's start).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness.backfill_log import arm_log
from benchmarks.harness.experiment import matching_backfill, submitted_at
from benchmarks.harness.model import (
    Arm,
    Arrival,
    AsRun,
    Inventory,
    Job,
    Pool,
    QueueView,
    ReplayConfig,
    ReplayDecision,
)
from benchmarks.harness.simulate import simulate
from benchmarks.harness.slurm import run_on_slurm

INVENTORY = Inventory(pools=[Pool(partition="a", gpu_type="a100", nodes=2, gpus_per_node=8)])
Scene = dict[str, tuple[float, int, int, float, float]]
"""Job name -> (arrival s, GPUs, nodes, run s, limit s)."""
SCENES: dict[str, Scene] = {
    "whole-node": {
        "x": (0, 6, 1, 20, 60),
        "y": (0, 4, 1, 5, 60),
        "b": (1, 8, 2, 5, 60),
        "d": (2, 4, 1, 30, 120),
    },
    "blocked-head": {
        "x": (0, 6, 1, 20, 60),
        "y": (0, 4, 1, 5, 60),
        "b": (1, 16, 2, 5, 60),
        "d": (2, 8, 1, 5, 60),
    },
}


def _jobs(scene: Scene) -> list[Job]:
    return [
        Job(
            arrival=Arrival(name=name, time_s=at, application="toy", gpus=gpus, global_batch=64),
            steps=max(1, round(run_s)),
            user_gpu_type="a100",
            user_limit_s=limit_s,
        )
        for name, (at, gpus, _, run_s, limit_s) in scene.items()
    ]


def _arm(scene: Scene) -> Arm:
    def decide(job: Job, view: QueueView) -> ReplayDecision:
        _, gpus, nodes, _, limit_s = scene[job.arrival.name]
        config = ReplayConfig(gpu_type="a100", gpus=gpus, nodes=nodes, micro_batch=8, accumulation=1)
        return ReplayDecision(partition="a", config=config, time_limit_s=limit_s)

    return decide


def _truth(job: Job, config: ReplayConfig) -> float:
    return float(job.steps)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-port", type=int, default=24000, help="the sandbox's first port")
    args = parser.parse_args(argv)
    print("| scene | job | twin start-end (s) | Slurm start-end (s) |")
    print("| --- | --- | --- | --- |")
    for name, scene in SCENES.items():
        jobs, arm = _jobs(scene), _arm(scene)
        with tempfile.TemporaryDirectory(prefix="advisor-probe-") as root:
            real = run_on_slurm(jobs, arm, "habits", INVENTORY, _truth, 1.0, Path(root), args.base_port)
            with (Path(root) / "log" / "slurmctld.log").open(encoding="utf-8", errors="replace") as lines:
                log = arm_log(lines, real, 1.0)
        # The twin on the real run's clock (the will-run test's batches end at marks on it), its
        # submissions, its backfill passes and its jobs' holds.
        backfill = matching_backfill(1.0, real[0].real_zero_s, (), log.passes_s)
        sent = {o.name: when for o in real if (when := submitted_at(o)) is not None}
        as_run = AsRun(submitted_at=sent, held_s=log.held_s)
        twin = simulate(jobs, arm, "habits", INVENTORY, _truth, backfill=backfill, as_run=as_run)
        slurm = {outcome.name: outcome for outcome in real}
        for outcome in twin:
            there = slurm[outcome.name]
            print(
                f"| {name} | {outcome.name} | {outcome.start_s:.0f}-{outcome.end_s:.0f} | "
                f"{there.start_s:.0f}-{there.end_s:.0f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
