"""`benchmarks/multigpu.py` predicts a left-out application from the others, and bounds that with all."""

from __future__ import annotations

import pytest

from advisor.comm.sync import Spread, ring_bytes
from benchmarks.multigpu import PARAMETERS, Placement, all_applications, leave_one_out, mape

SPREADS = [Spread(devices=d, nodes=n) for d, n in ((2, 1), (4, 1), (8, 1), (2, 2), (4, 2), (8, 2))]


def _placements(slower: str | None = None) -> list[Placement]:
    """Steps that are the one-GPU step plus a ring all-reduce (0.2 ms + 10 GB/s of bus bandwidth within a
    node, 1 ms + 1 GB/s across), nothing hidden; ``slower``'s all-reduce takes three times as long."""
    found = []
    for application in ("bert", "cifar10", "imagenet", "ncf"):
        for spread in SPREADS:
            for one_gpu_s in (0.05, 0.2):
                latency, bus = (2e-4, 10e9) if spread.nodes == 1 else (1e-3, 1e9)
                sync_s = latency + ring_bytes(PARAMETERS[application] * 4, spread.devices) / bus
                sync_s *= 3 if application == slower else 1
                found.append(Placement(application, "v100", spread, one_gpu_s, one_gpu_s + sync_s, sync_s))
    return found


def test_an_application_whose_all_reduce_the_others_share_is_predicted_from_them_exactly() -> None:
    placements = _placements()
    left_out = mape(placements, leave_one_out(placements))
    assert left_out["all"] == pytest.approx(0.0, abs=1.0)
    assert mape(placements, all_applications(placements))["all"] == pytest.approx(0.0, abs=1.0)


def test_the_bound_fits_the_held_out_application_too_so_it_misses_it_by_less() -> None:
    placements = _placements(slower="imagenet")
    left_out = mape(placements, leave_one_out(placements))["imagenet"]
    bound = mape(placements, all_applications(placements))["imagenet"]
    # Fitted on the other three, imagenet's all-reduce is a third of its real one: a large miss.
    assert left_out > 20
    assert bound < left_out
