"""The sync model: a ring all-reduce's bytes by hand, fits that recover known links and overlaps."""

from __future__ import annotations

import pytest

from advisor.comm.sync import (
    DEFAULT_COMMUNICATION,
    AllReduceSample,
    Link,
    Spread,
    WholeStep,
    communication,
    fit_link,
    fit_overlap,
    overlapped,
    ring_bytes,
)

NODE = Link(latency_s=20e-6, latency_per_device_s=5e-6, bus_bytes_s=100e9)
NETWORK = Link(latency_s=200e-6, latency_per_device_s=10e-6, bus_bytes_s=10e9)


def test_a_ring_all_reduce_moves_two_n_minus_one_over_n_of_the_payload_per_link() -> None:
    # 4 devices: each sends and receives 3 chunks of a quarter twice (reduce-scatter, then all-gather).
    assert ring_bytes(400, 4) == 600 and ring_bytes(400, 2) == 400 and ring_bytes(400, 1) == 0
    # 8 devices, 1 GB at 100 GB/s on the bus: 1.75 GB over each link, 17.5 ms, after 20 + 6 * 5 us.
    assert NODE.seconds(10**9, 8) == pytest.approx(50e-6 + 0.0175)
    assert NODE.seconds(10**9, 1) == 0


def test_the_bus_bandwidth_is_nccl_tests_algorithm_bandwidth_times_the_ring_factor() -> None:
    sample = AllReduceSample(spread=Spread(devices=4, nodes=1), bytes=10**8, seconds=0.01)
    assert sample.bus_bytes_s == pytest.approx(10**8 / 0.01 * 2 * 3 / 4)


def _samples(link: Link, nodes: int) -> list[AllReduceSample]:
    return [
        AllReduceSample(spread=Spread(devices=d, nodes=nodes), bytes=size, seconds=link.seconds(size, d))
        for d in (2, 4, 8)
        for size in (2**10, 2**16, 2**20, 2**26, 2**30)
    ]


def test_a_link_is_recovered_from_its_own_all_reduces() -> None:
    fitted = fit_link(_samples(NODE, nodes=1))
    assert fitted is not None
    assert fitted.bus_bytes_s == pytest.approx(NODE.bus_bytes_s, rel=1e-3)
    assert fitted.latency_s == pytest.approx(NODE.latency_s, rel=1e-2)
    assert fitted.latency_per_device_s == pytest.approx(NODE.latency_per_device_s, rel=1e-2)
    assert fit_link([]) is None
    tiny = AllReduceSample(spread=Spread(devices=2, nodes=1), bytes=1024, seconds=1e-5)
    assert fit_link([tiny]) is None, "latency alone says nothing of the bandwidth"


def test_the_overlap_of_measured_steps_is_recovered() -> None:
    spread = Spread(devices=8, nodes=2)
    steps = [
        WholeStep(
            spread=spread,
            gradient_bytes=size,
            compute_s=compute,
            step_s=overlapped(compute, NETWORK.seconds(size, 8), 2.5),
        )
        for size in (10**7, 10**8, 4 * 10**8)
        for compute in (0.01, 0.05, 0.2)
    ]
    assert fit_overlap(steps, NODE, NETWORK) == pytest.approx(2.5, rel=1e-3)
    assert overlapped(3.0, 4.0, 2.0) == pytest.approx(5.0), "the 3-4-5 triangle"
    assert overlapped(3.0, 4.0, 1.0) == 7.0 and overlapped(3.0, 0.0, 2.0) == 3.0


def test_a_partition_that_measured_nothing_keeps_the_stated_default() -> None:
    assert communication([]) == DEFAULT_COMMUNICATION and not DEFAULT_COMMUNICATION.measured
    within = communication(_samples(NODE, nodes=1))
    assert within.measured and within.network == DEFAULT_COMMUNICATION.network
    assert within.node.bus_bytes_s == pytest.approx(NODE.bus_bytes_s, rel=1e-3)
    spread = Spread(devices=4, nodes=1)
    assert within.sync_s(10**8, spread) == pytest.approx(NODE.seconds(10**8, 4), rel=1e-2)
    assert within.sync_s(10**8, Spread(devices=1, nodes=1)) == 0
