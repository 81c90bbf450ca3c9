"""Ground truth for a replay: how long a configuration of a job really runs, from Sia's measured step times.

Sia's table measures one training step per application, GPU type, placement and local batch. Two choices
make it an answer for any configuration: placements with the same GPU and node count are one curve (their
median: a packed job does not choose its exact placement), and an unmeasured local batch is interpolated
linearly between its measured neighbours. Outside a curve's measured range there is no answer: beyond its
largest batch the job does not fit in memory, below its smallest nobody measured it.
"""

from __future__ import annotations

import csv
import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from benchmarks.harness.model import Arrival, Job, ReplayConfig

CLUSTER_TYPES = {"aws": "t4", "azure": "v100", "dgx-ext": "a100", "rtx": "rtx"}
"""Sia's cluster names -> the GPU types a replay uses. ``dgx`` is a subset of ``dgx-ext`` (same A100s, fewer
batches); ``quad`` has too few rows to host a partition."""

MAX_ACCUMULATION = 8
BATCH_TOLERANCE = 0.05
"""A configuration keeps the user's global batch when GPUs x accumulation x micro-batch is within 5% of it."""

Fits = Callable[[ReplayConfig], bool]
"""Whether a configuration can run: the truth's view (measured) or the advisor's (what it has seen)."""

_Curve = tuple[tuple[int, ...], tuple[float, ...]]


@dataclass(frozen=True)
class StepRow:
    """One point of a curve: the median step time over the placements with this GPU and node count."""

    application: str
    gpu_type: str
    gpus: int
    nodes: int
    local_batch: int
    step_s: float


@dataclass(frozen=True)
class StepTable:
    rows: tuple[StepRow, ...]
    _curves: dict[tuple[str, str, int, int], _Curve] = field(init=False, repr=False, compare=False)
    _sizes: dict[str, int] = field(init=False, repr=False, compare=False)
    """GPU type -> GPUs per node, asked once per job of a trace: worked out once."""

    def __post_init__(self) -> None:
        points: dict[tuple[str, str, int, int], list[tuple[int, float]]] = defaultdict(list)
        for row in self.rows:
            points[(row.application, row.gpu_type, row.gpus, row.nodes)].append((row.local_batch, row.step_s))
        curves = {}
        for key, pairs in points.items():
            pairs.sort()
            curves[key] = (tuple(b for b, _ in pairs), tuple(s for _, s in pairs))
        object.__setattr__(self, "_curves", curves)
        sizes: dict[str, int] = {}
        for row in self.rows:
            sizes[row.gpu_type] = max(sizes.get(row.gpu_type, 0), row.gpus if row.nodes == 1 else 0)
        object.__setattr__(self, "_sizes", sizes)

    @classmethod
    def load(cls, path: Path) -> StepTable:
        """Sia's ``step_times.csv``; rows of other clusters are skipped."""
        samples: dict[tuple[str, str, int, int, int], list[float]] = defaultdict(list)
        with path.open(newline="") as handle:
            for line, record in enumerate(csv.DictReader(handle), start=2):
                gpu_type = CLUSTER_TYPES.get(record.get("cluster") or "")
                if gpu_type is None:
                    continue
                try:
                    key = (
                        record["application"],
                        gpu_type,
                        int(record["num_gpus"]),
                        int(record["num_nodes"]),
                        int(record["local_bsz"]),
                    )
                    samples[key].append(float(record["step_time"]))
                except (KeyError, TypeError, ValueError) as error:
                    raise ValueError(f"{path}:{line}: {error!r}") from error
        return cls(tuple(StepRow(*key, median(times)) for key, times in sorted(samples.items())))

    def micro_step_s(
        self, application: str, gpu_type: str, gpus: int, nodes: int, batch: int
    ) -> float | None:
        """One micro-step's time, interpolated in the local batch; None outside the measured range."""
        curve = self._curves.get((application, gpu_type, gpus, nodes))
        if curve is None:
            return None
        batches, times = curve
        index = bisect_left(batches, batch)
        if index == len(batches) or (index == 0 and batch < batches[0]):
            return None
        if batches[index] == batch:
            return times[index]
        share = (batch - batches[index - 1]) / (batches[index] - batches[index - 1])
        return times[index - 1] + share * (times[index] - times[index - 1])

    def optimizer_step_s(self, application: str, config: ReplayConfig) -> float | None:
        """Accumulation k is k micro-steps (the all-reduce counted in each: a slight overestimate)."""
        micro = self.micro_step_s(application, config.gpu_type, config.gpus, config.nodes, config.micro_batch)
        return None if micro is None else micro * config.accumulation

    def true_run_s(self, job: Job, config: ReplayConfig) -> float:
        """The job's run time in ``config``: a ``TrueRunTime``. An unmeasured configuration is an error."""
        step = self.optimizer_step_s(job.arrival.application, config)
        if step is None:
            raise ValueError(f"{job.arrival.name}: no measured step time for {config}")
        return job.steps * step

    def fits(self, application: str) -> Fits:
        return lambda config: self.optimizer_step_s(application, config) is not None

    def gpu_types(self) -> set[str]:
        return set(self._sizes)

    def gpus_per_node(self, gpu_type: str) -> int:
        """The measured machines' size: the most GPUs any one-node row of that type used."""
        if not self._sizes.get(gpu_type):
            raise ValueError(f"no one-node rows of {gpu_type}")
        return self._sizes[gpu_type]

    def placements(self, application: str, gpu_type: str) -> set[tuple[int, int]]:
        """(GPUs, nodes) pairs measured for an application on a GPU type."""
        return {(g, n) for (app, kind, g, n) in self._curves if app == application and kind == gpu_type}

    def batch_range(self, application: str, gpu_type: str, gpus: int, nodes: int) -> tuple[int, int] | None:
        curve = self._curves.get((application, gpu_type, gpus, nodes))
        return None if curve is None else (curve[0][0], curve[0][-1])


def nodes_for(gpus: int, gpus_per_node: int) -> int:
    """The packed placement: the fewest nodes that hold the GPUs."""
    return math.ceil(gpus / gpus_per_node)


def batch_splits(global_batch: int, gpus: int) -> Iterator[tuple[int, int]]:
    """(micro-batch, accumulation) pairs that keep the global batch, fewest accumulation steps first."""
    for accumulation in range(1, MAX_ACCUMULATION + 1):
        micro = round(global_batch / (gpus * accumulation))
        if micro >= 1 and abs(gpus * accumulation * micro - global_batch) <= BATCH_TOLERANCE * global_batch:
            yield micro, accumulation


def configs_for(
    arrival: Arrival, gpu_type: str, gpus_per_node: int, gpu_counts: Sequence[int], fits: Fits
) -> list[ReplayConfig]:
    """Every configuration on these GPU counts that keeps the arrival's global batch and fits."""
    found = []
    for gpus in gpu_counts:
        nodes = nodes_for(gpus, gpus_per_node)
        for micro, accumulation in batch_splits(arrival.global_batch, gpus):
            config = ReplayConfig(
                gpu_type=gpu_type, gpus=gpus, nodes=nodes, micro_batch=micro, accumulation=accumulation
            )
            if fits(config):
                found.append(config)
    return found


def user_config(arrival: Arrival, gpu_type: str, gpus_per_node: int, fits: Fits) -> ReplayConfig | None:
    """What the user runs: their GPU count and global batch, accumulating only as much as memory forces."""
    configs = configs_for(arrival, gpu_type, gpus_per_node, [arrival.gpus], fits)
    return configs[0] if configs else None


def feasible_configs(
    table: StepTable, arrival: Arrival, gpu_type: str, gpus_per_node: int
) -> list[ReplayConfig]:
    """The truth's view: every measured configuration of the arrival's application on a GPU type."""
    counts = sorted(
        gpus
        for gpus, nodes in table.placements(arrival.application, gpu_type)
        if nodes == nodes_for(gpus, gpus_per_node)
    )
    return configs_for(arrival, gpu_type, gpus_per_node, counts, table.fits(arrival.application))
