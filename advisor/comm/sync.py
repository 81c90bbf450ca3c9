"""What data parallelism adds to a step: the gradient all-reduce, and how much of it the backward hides.

An all-reduce of ``b`` bytes over ``d`` devices moves ``2 (d - 1) / d * b`` bytes through each link of a
ring (nccl-tests' bus bandwidth is the algorithm bandwidth times that factor), after a latency that grows
with the devices: ``alpha + beta * (d - 2) + 2 (d - 1) / d * b / bus``, fitted apart within a node and
across nodes (the network is the slower link of a ring that spans nodes). The step overlaps the last
micro-step's backward with the all-reduce as Pollux models it, ``(compute^g + sync^g)^(1/g)``: ``g = 1``
is no overlap, a large ``g`` is all of the shorter one hidden.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.predict.leastsquares import relative_least_squares

Level = Literal["node", "network"]
"""Within one node (NVLink, PCIe, shared memory) or across nodes (InfiniBand, Ethernet)."""

MAX_OVERLAP = 10.0
"""Pollux's bound on the overlap exponent: beyond it the step is the longer of the two anyway."""


class Spread(BaseModel):
    """How a data-parallel job lies on the cluster: its devices (GPUs, or CPU ranks) over so many nodes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    devices: int = Field(ge=1)
    nodes: int = Field(ge=1)

    @property
    def level(self) -> Level:
        return "node" if self.nodes == 1 else "network"


class AllReduceSample(BaseModel):
    """One measured all-reduce: this many bytes over this spread took this long (the median of repeats)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    spread: Spread
    bytes: int = Field(ge=1)
    seconds: float = Field(gt=0)

    @property
    def bus_bytes_s(self) -> float:
        """nccl-tests' bus bandwidth: what each link carried per second."""
        return ring_bytes(self.bytes, self.spread.devices) / self.seconds


class Link(BaseModel):
    """One level's all-reduce cost: a latency, its growth per device past two, and a bus bandwidth."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    latency_s: float = Field(ge=0)
    latency_per_device_s: float = Field(ge=0)
    bus_bytes_s: float = Field(gt=0)

    def seconds(self, payload: int, devices: int) -> float:
        if devices < 2:
            return 0.0
        latency = self.latency_s + self.latency_per_device_s * (devices - 2)
        return latency + ring_bytes(payload, devices) / self.bus_bytes_s


class Communication(BaseModel):
    """A partition's all-reduce within and across its nodes, and its steps' overlap exponent; `measured`
    is False for the stated default, which lowers a prediction's confidence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node: Link
    network: Link
    overlap: float = Field(ge=1, le=MAX_OVERLAP)
    measured: bool

    def sync_s(self, gradient_bytes: int, spread: Spread) -> float:
        """One all-reduce of the gradients over ``spread``; 0 on one device."""
        link = self.node if spread.level == "node" else self.network
        return link.seconds(gradient_bytes, spread.devices)

    def step_s(self, compute_s: float, sync_s: float) -> float:
        """A step whose last backward overlaps the all-reduce."""
        return overlapped(compute_s, sync_s, self.overlap)


DEFAULT_COMMUNICATION = Communication(
    node=Link(latency_s=50e-6, latency_per_device_s=10e-6, bus_bytes_s=12e9),
    network=Link(latency_s=100e-6, latency_per_device_s=20e-6, bus_bytes_s=1.25e9),
    overlap=1.0,
    measured=False,
)
"""For a partition that never measured its communication: PCIe within a node, 10 Gb Ethernet between nodes,
no overlap (the conservative case)."""


def ring_bytes(payload: int, devices: int) -> float:
    """What each link of a ring all-reduce carries: ``2 (d - 1) / d`` times the payload."""
    return 2 * (devices - 1) / devices * payload if devices > 1 else 0.0


def overlapped(compute_s: float, sync_s: float, overlap: float) -> float:
    if sync_s <= 0:
        return compute_s
    return float((compute_s**overlap + sync_s**overlap) ** (1 / overlap))


def fit_link(samples: Sequence[AllReduceSample]) -> Link | None:
    """Latency, its growth per device and the bus bandwidth, by least squares on relative error; None
    without samples that tell bandwidth from latency (no sample above a kilobyte)."""
    usable = [s for s in samples if s.spread.devices >= 2]
    if not usable or max(s.bytes for s in usable) <= 1024:
        return None
    terms = [[1.0, float(s.spread.devices - 2), ring_bytes(s.bytes, s.spread.devices)] for s in usable]
    latency, per_device, per_byte = relative_least_squares(terms, [s.seconds for s in usable])
    if per_byte <= 0:
        return None
    return Link(latency_s=latency, latency_per_device_s=per_device, bus_bytes_s=1 / per_byte)


class WholeStep(BaseModel):
    """A measured data-parallel step, and the same step on one device (its compute, no communication)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    spread: Spread
    gradient_bytes: int = Field(ge=0)
    compute_s: float = Field(gt=0)
    step_s: float = Field(gt=0)


def fit_overlap(steps: Sequence[WholeStep], node: Link, network: Link) -> float:
    """The exponent that fits the measured steps best in log error, with the links' all-reduce; 1 (no
    overlap) without any step that communicates."""
    links = {"node": node, "network": network}
    parts = [
        (s.compute_s, links[s.spread.level].seconds(s.gradient_bytes, s.spread.devices), s.step_s)
        for s in steps
    ]
    usable = [(compute, sync, step) for compute, sync, step in parts if sync > 0]
    if not usable:
        return 1.0
    # Imported here: only fitting needs scipy.optimize, and the recommender imports this module.
    from scipy.optimize import minimize_scalar  # type: ignore[import-untyped]

    def loss(overlap: float) -> float:
        return sum(math.log(overlapped(compute, sync, overlap) / step) ** 2 for compute, sync, step in usable)

    found = minimize_scalar(loss, bounds=(1.0, MAX_OVERLAP), method="bounded")
    return float(found.x)


def communication(
    samples: Sequence[AllReduceSample], steps: Sequence[WholeStep] = (), default: Communication | None = None
) -> Communication:
    """A partition's communication from what it measured; a level it never measured keeps the default's,
    and without whole steps the overlap stays the default's too."""
    base = default or DEFAULT_COMMUNICATION
    node = fit_link([s for s in samples if s.spread.level == "node"])
    network = fit_link([s for s in samples if s.spread.level == "network"])
    if node is None and network is None:
        return base
    node, network = node or base.node, network or base.network
    return Communication(
        node=node,
        network=network,
        overlap=fit_overlap(steps, node, network) if steps else base.overlap,
        measured=True,
    )
