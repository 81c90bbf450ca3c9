"""The twin's inputs: the submission it takes (`experiment.submitted_at`), and moved within a real second
(`benchmarks.harness.twin_jitter.jittered`)."""

from __future__ import annotations

import pytest

from benchmarks.harness.experiment import submitted_at
from benchmarks.harness.model import ArmName, ReplayConfig, ReplayDecision, ReplayOutcome
from benchmarks.harness.twin_jitter import jittered


def _outcome(name: str, arrival: float, submitted: float | None) -> ReplayOutcome:
    decision = ReplayDecision(
        partition="v100",
        config=ReplayConfig(gpu_type="v100", gpus=2, nodes=1, micro_batch=32, accumulation=1),
        time_limit_s=600.0,
    )
    return ReplayOutcome(
        name=name,
        arm="advisor",
        arrival_s=arrival,
        start_s=2000.0,
        end_s=2100.0,
        decision=decision,
        true_run_s=100.0,
        timed_out=False,
        submitted_s=submitted,
    )


def test_each_submission_moves_within_its_real_second_and_never_before_its_arrival() -> None:
    """Compression 400: a submission known as 1,000 s (a second's middle) lies in 800-1,200 s; one known
    as 1,000 s that arrived at 900 s cannot move below 900 s; one with no submission time stays."""
    real: dict[ArmName, list[ReplayOutcome]] = {
        "advisor": [_outcome(f"j{i}", 0.0, 1000.0) for i in range(50)]
    }
    real["advisor"] += [_outcome("late", 900.0, 1000.0), _outcome("unknown", 0.0, None)]
    moved = {seed: jittered(real, 400.0, seed)["advisor"] for seed in (0, 1)}
    for outcomes in moved.values():
        times = [o.submitted_s for o in outcomes[:50]]
        assert all(t is not None and 800.0 <= t <= 1200.0 for t in times)
        assert min(t for t in times if t is not None) < 900.0 < max(t for t in times if t is not None)
        assert outcomes[50].submitted_s is not None and 900.0 <= outcomes[50].submitted_s <= 1200.0
        assert outcomes[51].submitted_s is None
    assert moved[0] == jittered(real, 400.0, 0)["advisor"], "a seed gives the same draw"
    assert moved[0] != moved[1]
    assert [o.start_s for o in moved[0]] == [o.start_s for o in real["advisor"]], "only submissions move"


def test_the_harness_s_own_sbatch_times_move_with_the_submission_and_the_twin_takes_their_return() -> None:
    """A job Slurm recorded in the second read as 1,000 s, whose sbatch ran at 1,010.4 s and returned at
    1,018.8 s (the harness's clock): the twin submits it at 1,018.8 s; moved, both times move by the same
    draw as Slurm's second, neither before the arrival (1,005 s)."""
    timed = _outcome("timed", 1005.0, 1000.0).model_copy(update={"sbatch_s": (1010.4, 1018.8)})
    assert submitted_at(timed) == 1018.8
    assert submitted_at(_outcome("untimed", 0.0, 1000.0)) == 1000.0
    for seed in range(20):
        (moved,) = jittered({"advisor": [timed]}, 400.0, seed)["advisor"]
        assert moved.submitted_s is not None and moved.sbatch_s is not None
        sent, answered = moved.sbatch_s
        by = moved.submitted_s - 1000.0
        assert -200.0 <= by <= 200.0
        if moved.submitted_s > 1005.0:  # not held at the arrival
            assert sent == pytest.approx(max(1005.0, 1010.4 + by))
            assert answered == pytest.approx(max(1005.0, 1018.8 + by))
        assert 1005.0 <= sent <= answered
