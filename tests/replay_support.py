"""Small synthetic step tables and workloads for the replay's tests, written as the real files are."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from benchmarks.harness.model import Arrival, Inventory, Job, Pool, ReplayQuery

STEP_COLUMNS = [
    "application",
    "cluster",
    "placement",
    "num_nodes",
    "num_gpus",
    "local_bsz",
    "step_time",
    "sync_time",
]
#: (cluster, placement) pairs of a small table: T4 nodes of 4 GPUs, A100 nodes of 8
PLACEMENTS = {
    "aws": ["1", "2", "4", "44"],
    "dgx-ext": ["1", "2", "4", "8", "88"],
    "azure": ["1", "2", "4", "8"],
}
SPEED = {"aws": 1.0, "azure": 2.0, "dgx-ext": 4.0}
BATCHES = {
    "aws": [8, 16, 32, 64, 128],
    "azure": [8, 16, 32, 64, 128, 256],
    "dgx-ext": [8, 16, 32, 64, 128, 256],
}

StepTime = Callable[[str, str, int, int, int], float]


def smooth_step(application: str, cluster: str, gpus: int, nodes: int, batch: int) -> float:
    """Fixed cost plus per-sample cost, slower per GPU type, a little all-reduce per extra node."""
    per_sample = 0.002 if application == "toy" else 0.004
    return (0.05 + per_sample * batch) / SPEED[cluster] + 0.01 * (nodes - 1) + 0.001 * gpus


def spiked_at(spike_batch: int) -> StepTime:
    """The smooth table with one batch of "toy" ten times slower: only a model that saw it predicts it."""

    def step_time(application: str, cluster: str, gpus: int, nodes: int, batch: int) -> float:
        spike = 10.0 if (application, batch) == ("toy", spike_batch) else 1.0
        return smooth_step(application, cluster, gpus, nodes, batch) * spike

    return step_time


def step_rows(
    step_time: StepTime = smooth_step, applications: Iterable[str] = ("toy", "big")
) -> list[list[str]]:
    rows = []
    for application in applications:
        for cluster, placements in PLACEMENTS.items():
            for placement in placements:
                gpus = sum(int(digit) for digit in placement)
                for batch in BATCHES[cluster]:
                    seconds = step_time(application, cluster, gpus, len(placement), batch)
                    rows.append(
                        [
                            application,
                            cluster,
                            placement,
                            str(len(placement)),
                            str(gpus),
                            str(batch),
                            repr(seconds),
                            "0.01",
                        ]
                    )
    return rows


def write_csv(path: Path, header: list[str], rows: Iterable[list[str]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_steps(path: Path, step_time: StepTime = smooth_step) -> Path:
    return write_csv(path, STEP_COLUMNS, step_rows(step_time))


def write_philly(path: Path, durations: Iterable[float]) -> Path:
    rows = [["2017-10-09 07:01:55", repr(d), "1", repr(d), "11cb48"] for d in durations]
    return write_csv(path, ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"], rows)


def write_workload(path: Path, jobs: Iterable[tuple[float, str, int, int]]) -> Path:
    """(arrival, application, GPUs, global batch) per job."""
    rows = [[f"job-{i}", repr(t), app, str(g), str(b)] for i, (t, app, g, b) in enumerate(jobs)]
    return write_csv(path, ["name", "time", "application", "num_replicas", "batch_size"], rows)


HOUR = 3600.0
INVENTORY = Inventory(
    pools=[
        Pool(partition="fast", gpu_type="a100", nodes=2, gpus_per_node=8),
        Pool(partition="mid", gpu_type="v100", nodes=2, gpus_per_node=8),
        Pool(partition="slow", gpu_type="t4", nodes=2, gpus_per_node=4),
    ]
)


class SetWaits:
    """A queue whose waits per partition are given; records what each estimator was asked."""

    def __init__(self, slurm: Mapping[str, float | None], advisor: Mapping[str, float | None] | None = None):
        self.slurm = slurm
        self.advisor = advisor if advisor is not None else slurm
        self.slurm_asked: list[ReplayQuery] = []
        self.advisor_asked: list[ReplayQuery] = []

    def slurm_waits(self, queries: Sequence[ReplayQuery]) -> list[float | None]:
        self.slurm_asked.extend(queries)
        return [self.slurm.get(q.partition, 0.0) for q in queries]

    def advisor_waits(self, queries: Sequence[ReplayQuery]) -> list[float | None]:
        self.advisor_asked.extend(queries)
        return [self.advisor.get(q.partition, 0.0) for q in queries]


def job(user_gpu_type: str = "a100", gpus: int = 4, global_batch: int = 256, steps: int = 20_000) -> Job:
    arrival = Arrival(name="j", time_s=0.0, application="toy", gpus=gpus, global_batch=global_batch)
    return Job(arrival=arrival, steps=steps, user_gpu_type=user_gpu_type, user_limit_s=6 * HOUR)
