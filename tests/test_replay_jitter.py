"""The twin's inputs moved within their resolution (`benchmarks.harness.twin_jitter.jittered`)."""

from __future__ import annotations

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
