"""Reading real Slurm's backfill passes from slurmctld's log: slots kept and moved between events."""

from datetime import datetime

import pytest

from benchmarks.harness.backfill_log import arm_log, stability
from benchmarks.harness.model import ArmLog, AsRun, ReplayConfig, ReplayDecision, ReplayOutcome

_PASS = "[2026-12-05T03:02:{s:02d}.500] sched/backfill: _attempt_backfill: beginning\n"
_SLOT = (
    "[2026-12-05T03:02:{s:02d}.510] sched/backfill: _dump_job_sched: JobId={job} to start at "
    "2026-12-05T03:0{m}:00, end at 2026-12-05T03:09:00 on nodes {nodes} in partition {part}\n"
)


def _log(
    *passes: tuple[int, list[tuple[int, int, str, str]]], between: dict[int, str] | None = None
) -> list[str]:
    lines = []
    for second, slots in passes:
        lines.append(_PASS.format(s=second))
        lines += [_SLOT.format(s=second, job=j, m=m, nodes=n, part=p) for j, m, n, p in slots]
        if between and second in between:
            lines.append(f"[2026-12-05T03:02:{second:02d}.900] {between[second]}\n")
    return lines


def test_a_slot_that_moves_with_no_event_is_counted_apart_from_one_kept() -> None:
    log = _log(
        (1, [(76, 5, "a100-[2,4]", "a100"), (78, 6, "a100-[1-2]", "a100"), (9, 4, "t4-1", "t4")]),
        (2, [(76, 5, "a100-[2,4]", "a100"), (9, 4, "t4-1", "t4")]),
        (3, [(76, 7, "a100-[4-5]", "a100"), (9, 4, "t4-1", "t4")]),
    )
    found = stability(log)
    # a100 1->2 kept, 2->3 moved; t4 kept twice; the second job of a pass is not its first.
    assert found.kept == 3
    assert [(name, slot[0], slot[2], later[2]) for name, slot, later in found.moved] == [
        ("a100", 76, "a100-[2,4]", "a100-[4-5]")
    ]


def test_passes_with_an_event_of_the_partition_between_them_are_not_compared() -> None:
    started = "sched: Allocate JobId=80 NodeList=a100-3 #CPUs=1 Partition=a100"
    ended_elsewhere = "_job_complete: JobId=9 done"
    log = _log(
        (1, [(76, 5, "a100-[2,4]", "a100")]),
        (2, [(76, 7, "a100-[4-5]", "a100")]),
        (3, [(76, 5, "a100-[2,4]", "a100"), (9, 4, "t4-1", "t4")]),
        (4, [(76, 5, "a100-[2,4]", "a100"), (9, 4, "t4-1", "t4")]),
        between={1: started, 3: ended_elsewhere},
    )
    found = stability(log)
    # 1->2 has a100's start between (skipped); 2->3 moved; 3->4 kept for a100, t4 skipped (job 9 of t4 ended).
    assert found.kept == 1
    assert len(found.moved) == 1
    assert found.quiet == 1  # 2->3 had no start or end anywhere


def test_a_move_after_an_end_in_another_partition_is_not_quiet() -> None:
    ended_elsewhere = "_job_complete: JobId=9 done"
    submitted_elsewhere = "_slurm_rpc_submit_batch_job: JobId=12 InitPrio=4294901360 usec=316"
    log = _log(
        (1, [(76, 5, "a100-[2,4]", "a100"), (9, 4, "t4-1", "t4")]),
        (2, [(76, 7, "a100-[4-5]", "a100"), (12, 4, "t4-1", "t4")]),
        (3, [(76, 5, "a100-[2,4]", "a100")]),
        between={1: ended_elsewhere, 2: submitted_elsewhere},
    )
    found = stability(log)
    # Both a100 moves count; 2->3 had only t4's submission of job 12 between: quiet. t4's job 9 ended
    # between 1 and 2.
    assert len(found.moved) == 2
    assert found.quiet == 1


def _ran(name: str, job_id: int, run_s: float, limit_s: float, zero: float) -> ReplayOutcome:
    decision = ReplayDecision(
        partition="a100",
        config=ReplayConfig(gpu_type="a100", gpus=8, nodes=1, micro_batch=32, accumulation=1),
        time_limit_s=limit_s,
    )
    return ReplayOutcome(
        name=name,
        arm="habits",
        arrival_s=0.0,
        start_s=400.0,
        end_s=2000.0,
        decision=decision,
        true_run_s=run_s,
        timed_out=run_s > limit_s,
        job_id=job_id,
        real_zero_s=zero,
    )


def test_an_arms_log_gives_its_passes_and_each_jobs_hold_past_its_run_from_its_pass() -> None:
    """Compression 400, the run's clock at 03:02:00: passes at 1 and 2 real s are 400 and 800 workload s.
    Job 7 (run 1,000 s) started in the pass at 1 s, 20 ms in, and completed at 4.5 s: held (4.5 - 1) x 400
    - 1,000 = 400 s past its run; job 9, killed at its 1,200-s limit, started in the pass at 2 s and
    completed at 5.5 s: 1,400 - 1,200 = 200 s; job 11 never completed and has none."""
    zero = datetime.fromisoformat("2026-12-05T03:02:00").timestamp()
    log = [
        "[2026-12-05T03:02:01.000] sched/backfill: _attempt_backfill: beginning\n",
        "[2026-12-05T03:02:01.020] sched/backfill: _start_job: Started JobId=7 in a100 on a100-1\n",
        "[2026-12-05T03:02:02.000] sched/backfill: _attempt_backfill: beginning\n",
        "[2026-12-05T03:02:02.010] sched/backfill: _start_job: Started JobId=9 in a100 on a100-2\n",
        "[2026-12-05T03:02:02.030] sched/backfill: _start_job: Started JobId=11 in a100 on a100-3\n",
        "[2026-12-05T03:02:04.500] _job_complete: JobId=7 done\n",
        "[2026-12-05T03:02:05.500] _job_complete: JobId=9 done\n",
    ]
    outcomes = [
        _ran("a", 7, 1000.0, 3600.0, zero),
        _ran("b", 9, 5000.0, 1200.0, zero),
        _ran("c", 11, 10.0, 60.0, zero),
    ]
    found = arm_log(log, outcomes, 400.0)
    assert found.passes_s == pytest.approx((400.0, 800.0))
    assert found.held_s == pytest.approx({"a": 400.0, "b": 200.0})
    assert arm_log(log, [o.model_copy(update={"real_zero_s": None}) for o in outcomes], 400.0) == ArmLog()


def test_a_job_not_in_the_log_holds_its_nodes_as_long_as_the_median_job_did() -> None:
    as_run = AsRun(held_s={"a": 10.0, "b": 30.0, "c": 50.0})
    assert (as_run.held("b"), as_run.held("rerun"), AsRun().held("a")) == (30.0, 30.0, 0.0)
