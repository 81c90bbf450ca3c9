"""Reading real Slurm's backfill passes from slurmctld's log: slots kept and moved between events."""

from benchmarks.harness.backfill_log import stability

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
