"""Every configuration the advisor may propose for a job, before anything is predicted.

A candidate keeps what the user trains: the samples per optimizer step stay the global batch (split into
micro-batches and accumulation steps), unless the user declared a range of acceptable global batches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field

from advisor.jobscript.advisor_lines import JobDescription
from advisor.policy.schema import Tuning


class Offer(BaseModel):
    """A partition as the candidates see it: what one job may get there."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    gpu_type: str | None
    gpus_per_node: int = Field(ge=0)
    max_time: timedelta | None
    nodes: int = Field(default=1, ge=1)
    """The nodes that serve jobs: how far one job may spread."""


class Candidate(BaseModel):
    """One way to run the job: where, on how many devices, and how each optimizer step is split."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    partition: str
    gpus: int = Field(ge=0)
    """Devices on each node, in data parallel; 0 on a partition without GPUs."""
    nodes: int = Field(default=1, ge=1)
    global_batch: int = Field(ge=1)
    micro_batch: int = Field(ge=1)
    accumulation: int = Field(ge=1)
    amp: bool
    channels_last: bool

    @property
    def devices(self) -> int:
        return max(self.gpus, 1) * self.nodes


def baseline(description: JobDescription, offer: Offer, gpus: int, nodes: int = 1) -> Candidate:
    """The job exactly as submitted (``gpus`` on each of ``nodes``): the whole per-device batch at once in
    fp32, or what a script that ignores the advice sets by its own flags."""
    devices, accumulation = max(gpus, 1) * nodes, description.own_accumulation
    return Candidate(
        partition=offer.name,
        gpus=gpus,
        nodes=nodes,
        global_batch=description.global_batch,
        micro_batch=max(description.global_batch // devices // accumulation, 1),
        accumulation=accumulation,
        amp=description.own_amp,
        channels_last=False,
    )


def job_candidates(
    description: JobDescription,
    offers: Sequence[Offer],
    requested_gpus: int,
    tuning: Tuning,
    largest_batch: Mapping[tuple[str, bool], int | None],
    requested_nodes: int = 1,
) -> list[Candidate]:
    """``requested_gpus`` on each of ``requested_nodes``; ``largest_batch[(partition, amp)]`` is the
    biggest micro-batch that fits a device; None: unknown."""
    found: list[Candidate] = []
    follows = description.follows_advice
    amps = [False, True] if description.allow_amp and tuning.amp and follows else [description.own_amp]
    layouts = [False, True] if tuning.channels_last and follows else [False]
    for offer in offers:
        spreads = _spreads(offer, requested_gpus, requested_nodes, tuning)
        # A script that keeps its own batch per device keeps its global batch only on as many GPUs.
        asked = requested_gpus * requested_nodes
        for gpus, nodes in spreads if follows else [(g, n) for g, n in spreads if g * n == asked]:
            for amp in amps:
                largest = largest_batch.get((offer.name, amp))
                for global_batch, micro, accumulation in _splits(description, gpus * nodes, largest, tuning):
                    for channels_last in layouts:
                        found.append(
                            Candidate(
                                partition=offer.name,
                                gpus=gpus,
                                nodes=nodes,
                                global_batch=global_batch,
                                micro_batch=micro,
                                accumulation=accumulation,
                                amp=amp,
                                channels_last=channels_last,
                            )
                        )
    return found


def _spreads(offer: Offer, per_node: int, nodes: int, tuning: Tuning) -> list[tuple[int, int]]:
    """(GPUs per node, nodes): powers of two up to what the user asked for in all, fewer GPUs may start
    sooner; each laid on as few nodes as hold it, and on more where the policy lets a job spread
    (``max_nodes``), since GPUs free on two nodes start a job that waits for one whole node."""
    if offer.gpus_per_node == 0:
        return [(0, 1)] if per_node == 0 and nodes == 1 else []
    if per_node == 0:
        return []
    asked = per_node * nodes
    widest = min(offer.nodes, max(tuning.max_nodes, nodes))
    ceiling = min(asked, offer.gpus_per_node * widest, tuning.max_gpus or asked)
    totals = sorted({*(n for n in (1, 2, 4, 8, 16, 32, 64) if n <= ceiling), ceiling})
    return [
        (total // spread, spread)
        for total in totals
        for spread in range(1, widest + 1)
        if total % spread == 0 and total // spread <= offer.gpus_per_node
    ]


def _splits(
    description: JobDescription, devices: int, largest: int | None, tuning: Tuning
) -> list[tuple[int, int, int]]:
    """(global batch, micro-batch, accumulation) choices for this many devices (at least one)."""
    devices = max(devices, 1)
    found: set[tuple[int, int, int]] = set()
    batches = [description.global_batch]
    if tuning.batch == "within-declared-range" and description.batch_range and largest:
        low, high = description.batch_range
        widest = min(high, devices * largest) // devices * devices
        if widest >= low:
            batches.append(widest)
    for global_batch in batches:
        if global_batch % devices:
            continue
        per_device, accumulation = global_batch // devices, description.own_accumulation
        if per_device % accumulation:
            continue
        if largest is None or per_device // accumulation <= largest or tuning.batch == "never":
            found.add((global_batch, per_device // accumulation, accumulation))
        elif description.allow_grad_accum and largest >= 1:
            micro = max(d for d in _divisors(per_device) if d <= largest)
            found.add((global_batch, micro, per_device // micro))
    return sorted(found)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def epochs(description: JobDescription) -> float:
    """The passes over the data the job makes: as declared, or its samples over the dataset's; 0 when the job
    gives steps and no dataset size (its per-epoch overhead is then unknown, and not counted)."""
    if description.epochs is not None:
        return description.epochs
    if description.dataset_size is None:
        return 0.0
    return description.total_steps * description.global_batch / description.dataset_size


def optimizer_steps(description: JobDescription, global_batch: int) -> int:
    """The job's optimizer steps at this global batch: the same epochs, or the same samples."""
    if description.epochs is not None and description.dataset_size is not None:
        return math.ceil(description.epochs * math.ceil(description.dataset_size / global_batch))
    return math.ceil(description.total_steps * description.global_batch / global_batch)
