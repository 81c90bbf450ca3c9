"""The twin's backfill passes come every ``bf_interval``; between them Slurm's main scheduler starts jobs in
priority order only."""

from __future__ import annotations

import pytest

from benchmarks.harness.scheduler import Backfill
from tests.test_replay_will_run import scene_starts

#: name: (arrival, GPUs, nodes, limit = run), on two nodes of 4 GPUs.
SCENE = {
    "a": (0.0, 4, 1, 100.0),
    "h": (1.0, 8, 2, 50.0),
    "s": (2.0, 4, 1, 30.0),
    "t": (3.0, 4, 1, 5.0),
}


@pytest.mark.parametrize(
    ("interval_s", "expected"),
    [
        # A pass at every event: s backfills on the free node at once (2-32, before h's slot at 100), t
        # when s ends (32-37).
        (0.0, {"a": 0.0, "h": 100.0, "s": 2.0, "t": 32.0}),
        # Passes at 12, 24, 36, 48 ...: a starts at its arrival (the head of the queue: the main
        # scheduler); s backfills at the pass at 12 (ends 42); at 42 the main scheduler finds the head, h,
        # not fitting and starts nothing, so t waits for the pass at 48; h, the head, starts at a's end.
        (12.0, {"a": 0.0, "h": 100.0, "s": 12.0, "t": 48.0}),
    ],
)
def test_jobs_behind_the_head_start_at_backfill_passes_only(
    interval_s: float, expected: dict[str, float]
) -> None:
    assert scene_starts(Backfill(pass_interval_s=interval_s), SCENE, nodes=2) == expected
