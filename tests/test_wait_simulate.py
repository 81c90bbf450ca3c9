"""The wait estimators' pure parts: remaining run times, the backfill replay and the estimator choice."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.slurm.models import FinishedJob
from advisor.wait.accuracy import WaitRecord, accuracies, preferred_sources
from advisor.wait.remaining import (
    RatioTable,
    RuntimeEstimates,
    estimate_runtimes,
    historical_ratios,
    remaining_seconds,
)
from advisor.wait.simulate import predict_starts
from advisor.wait.snapshot import Allocation, PendingJob, QueueSnapshot, RunningJob, SlotRequest, SnapshotNode

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)


def minutes(count: float) -> timedelta:
    return timedelta(minutes=count)


def gpu_nodes(prefix: str, count: int, gpus: int = 4) -> list[SnapshotNode]:
    return [
        SnapshotNode(name=f"{prefix}-{i}", gpus=gpus, cpus=32, memory_mb=64000) for i in range(1, count + 1)
    ]


def running(job_id: int, node: str, gpus: int, started: timedelta, limit: timedelta) -> RunningJob:
    """A job that started ``started`` ago on one node."""
    return RunningJob(
        job_id=job_id,
        user="alice",
        partition=node.split("-")[0],
        start_time=NOW - started,
        time_limit=limit,
        allocations=[Allocation(node=node, gpus=gpus, cpus=gpus, memory_mb=1000)],
    )


def request(partition: str, gpus: int, limit: timedelta | None, nodes: int = 1) -> SlotRequest:
    return SlotRequest(
        partitions=[partition], nodes=nodes, gpus_per_node=gpus, cpus_per_node=gpus or 1, time_limit=limit
    )


def pending(job_id: int, partition: str, gpus: int, limit: timedelta, nodes: int = 1) -> PendingJob:
    return PendingJob(job_id=job_id, user="bob", request=request(partition, gpus, limit, nodes))


def snapshot(
    nodes: list[SnapshotNode], jobs: list[RunningJob], queue: Sequence[PendingJob] = ()
) -> QueueSnapshot:
    partitions: dict[str, list[str]] = {}
    for node in nodes:
        partitions.setdefault(node.name.split("-")[0], []).append(node.name)
    return QueueSnapshot(taken_at=NOW, nodes=nodes, partitions=partitions, running=jobs, pending=list(queue))


def at_limits(state: QueueSnapshot) -> RuntimeEstimates:
    """Every job runs to its limit: Slurm's own assumption."""
    return estimate_runtimes(state, NOW, RatioTable(), {})


def start_in(state: QueueSnapshot, runtimes: RuntimeEstimates, candidate: SlotRequest) -> timedelta | None:
    (start,) = predict_starts(state, runtimes, [candidate], NOW)
    return None if start is None else start - NOW


# --- the replay -----------------------------------------------------------------------------------------


def test_an_idle_partition_starts_the_candidate_now() -> None:
    state = snapshot(gpu_nodes("a100", 2), [])
    assert start_in(state, at_limits(state), request("a100", 4, HOUR)) == timedelta(0)


def test_a_full_partition_starts_the_candidate_when_the_first_job_frees_enough_gpus() -> None:
    state = snapshot(
        gpu_nodes("t4", 2, gpus=2),
        [running(1, "t4-1", 2, started=minutes(10), limit=HOUR), running(2, "t4-2", 2, minutes(5), 2 * HOUR)],
    )
    runtimes = at_limits(state)
    assert start_in(state, runtimes, request("t4", 1, HOUR)) == minutes(50)
    # Two GPUs on one node: either node will do, the first to free them wins.
    assert start_in(state, runtimes, request("t4", 2, HOUR)) == minutes(50)
    # Both nodes: only once the second job ends too.
    assert start_in(state, runtimes, request("t4", 2, HOUR, nodes=2)) == minutes(115)


def test_predictions_shorter_than_limits_pull_the_start_earlier() -> None:
    state = snapshot(
        gpu_nodes("t4", 2, gpus=2),
        [running(1, "t4-1", 2, started=minutes(10), limit=HOUR), running(2, "t4-2", 2, minutes(5), 2 * HOUR)],
    )
    predicted = estimate_runtimes(state, NOW, RatioTable(), {2: minutes(25).total_seconds()})
    assert start_in(state, predicted, request("t4", 1, HOUR)) == minutes(20)
    halved = estimate_runtimes(state, NOW, RatioTable(by_partition={"t4": 0.5}), {})
    assert start_in(state, halved, request("t4", 1, HOUR)) == minutes(20)


def backfill_state(queue: list[PendingJob]) -> QueueSnapshot:
    """t4-1 busy for an hour, one of t4-2's two GPUs for three; a two-node job waits for both."""
    return snapshot(
        gpu_nodes("t4", 2, gpus=2),
        [
            running(1, "t4-1", 2, started=timedelta(0), limit=HOUR),
            running(2, "t4-2", 1, timedelta(0), 3 * HOUR),
        ],
        [pending(10, "t4", 2, 2 * HOUR, nodes=2), *queue],
    )


def test_a_short_candidate_backfills_before_a_big_jobs_reservation_and_a_long_one_waits() -> None:
    state = backfill_state([])
    runtimes = at_limits(state)
    # The free GPU on t4-2 is idle until the big job's reservation at 3 h: two hours fit, four do not.
    assert start_in(state, runtimes, request("t4", 1, 2 * HOUR)) == timedelta(0)
    # The long one waits for the big job, which starts at 3 h and holds both nodes until 5 h.
    assert start_in(state, runtimes, request("t4", 1, 4 * HOUR)) == 5 * HOUR


def test_backfill_is_judged_by_time_limits_not_predictions() -> None:
    # Job 11 is predicted to take ten minutes but asked for four hours: Slurm cannot backfill it into the
    # free GPU, so the candidate (two hours, last in priority) gets that GPU now.
    state = backfill_state([pending(11, "t4", 1, 4 * HOUR)])
    runtimes = estimate_runtimes(state, NOW, RatioTable(), {11: minutes(10).total_seconds()})
    assert start_in(state, runtimes, request("t4", 1, 2 * HOUR)) == timedelta(0)
    # A pending job that does fit before the reservation takes the GPU first.
    state = backfill_state([pending(11, "t4", 1, HOUR)])
    runtimes = estimate_runtimes(state, NOW, RatioTable(), {11: minutes(10).total_seconds()})
    assert start_in(state, runtimes, request("t4", 1, 2 * HOUR)) == minutes(10)


def test_a_request_larger_than_any_node_never_starts() -> None:
    state = snapshot(gpu_nodes("a100", 2), [])
    assert start_in(state, at_limits(state), request("a100", 8, HOUR)) is None
    assert start_in(state, at_limits(state), request("a100", 4, HOUR, nodes=3)) is None


def test_drained_nodes_take_no_new_jobs() -> None:
    first, second = gpu_nodes("a100", 2)
    state = snapshot(
        [first.model_copy(update={"usable": False}), second], [running(1, "a100-2", 4, HOUR, 2 * HOUR)]
    )
    assert start_in(state, at_limits(state), request("a100", 1, HOUR)) == HOUR


def test_jobs_in_other_partitions_do_not_delay_the_candidate() -> None:
    state = snapshot(
        [*gpu_nodes("t4", 1, gpus=2), *gpu_nodes("v100", 1)],
        [running(1, "t4-1", 2, timedelta(0), HOUR)],
        [pending(10, "v100", 4, HOUR), pending(11, "v100", 4, HOUR)],
    )
    starts = predict_starts(state, at_limits(state), [request("v100", 1, HOUR), request("t4", 1, HOUR)], NOW)
    assert starts == [NOW + 2 * HOUR, NOW + HOUR]


# --- the replay against a direct re-planning at every event ---------------------------------------------


def reference_starts(
    state: QueueSnapshot, runtimes: RuntimeEstimates, candidates: Sequence[SlotRequest], window: timedelta
) -> list[datetime | None]:
    """The same model, planned naively: every pass rebuilds the table and tries every start time."""
    capacity = {node.name: (node.gpus, node.cpus, node.memory_mb) for node in state.nodes}
    usable = {
        partition: [node.name for node in state.nodes if node.usable and node.name in members]
        for partition, members in state.partitions.items()
    }

    def seconds(value: timedelta | float | None) -> float:
        return math.inf if value is None else value.total_seconds() if isinstance(value, timedelta) else value

    jobs = []  # (actual end, limit end, [(node, amount)])
    for job in state.running:
        limit_end = seconds(None if job.limit_end is None else job.limit_end - NOW)
        end = min(seconds(runtimes.remaining_s.get(job.job_id, limit_end)), limit_end)
        held = [(held.node, (held.gpus, held.cpus, held.memory_mb)) for held in job.allocations]
        jobs.append((max(end, 0.0), max(limit_end, 0.0), held))
    waiting = [
        (
            job.request,
            min(
                seconds(runtimes.runtime_s.get(job.job_id, seconds(job.request.time_limit))),
                seconds(job.request.time_limit),
            ),
        )
        for job in state.pending
    ]

    def fits(table: list, node: str, begin: float, end: float, amount: tuple[int, int, int]) -> bool:
        points = {begin} | {b for n, b, _, _ in table if n == node and begin < b < end}
        for point in points:
            used = [sum(a[k] for n, b, e, a in table if n == node and b <= point < e) for k in range(3)]
            if any(capacity[node][k] - used[k] < amount[k] for k in range(3)):
                return False
        return True

    def earliest(table: list, job: SlotRequest, now: float) -> tuple[float, list[str]]:
        amount = (job.gpus_per_node, job.cpus_per_node, job.memory_mb_per_node)
        limit = seconds(job.time_limit)
        best: tuple[float, list[str]] = (math.inf, [])
        for partition in job.partitions:
            for start in sorted({now} | {e for _, _, e, _ in table if now < e < math.inf}):
                if start >= best[0]:
                    break
                fitting = [
                    node
                    for node in usable.get(partition, [])
                    if fits(table, node, start, start + limit, amount)
                ]
                if len(fitting) >= job.nodes:
                    best = (start, fitting[: job.nodes])
                    break
        return best

    results: list[datetime | None] = [None] * len(candidates)
    now = 0.0
    while any(result is None for result in results):
        jobs = [job for job in jobs if job[0] > now]
        table = [(node, now, limit_end, amount) for _, limit_end, held in jobs for node, amount in held]
        still = []
        for job, runtime in waiting:
            start, nodes = earliest(table, job, now)
            if start <= now + window.total_seconds():
                table += [
                    (
                        node,
                        start,
                        start + seconds(job.time_limit),
                        (job.gpus_per_node, job.cpus_per_node, job.memory_mb_per_node),
                    )
                    for node in nodes
                ]
            if start == now:
                amount = (job.gpus_per_node, job.cpus_per_node, job.memory_mb_per_node)
                jobs.append(
                    (now + runtime, now + seconds(job.time_limit), [(node, amount) for node in nodes])
                )
            else:
                still.append((job, runtime))
        waiting = still
        for index, candidate in enumerate(candidates):
            if results[index] is None and earliest(table, candidate, now)[0] == now:
                results[index] = NOW + timedelta(seconds=now)
        ends = [end for end, _, _ in jobs if end < math.inf]
        if not ends:
            break
        now = min(ends)
    return results


# Mostly finite limits and predictions, so that plans keep changing; ten-minute steps, so that times tie.
LIMITS = st.integers(0, 12).map(lambda n: minutes(10 * n) if n else None)
RUNTIMES = st.integers(-1, 24).map(lambda n: 300.0 * n if n >= 0 else None)
SHAPES = st.builds(
    SlotRequest,
    partitions=st.sampled_from([["p"], ["q"], ["p", "q"], ["q", "p"]]),
    nodes=st.integers(1, 2),
    gpus_per_node=st.integers(0, 2),
    cpus_per_node=st.integers(1, 2),
    memory_mb_per_node=st.integers(0, 1),
    time_limit=LIMITS,
)


@st.composite
def queues(draw: st.DrawFn) -> tuple[QueueSnapshot, RuntimeEstimates, list[SlotRequest], timedelta]:
    """Small crowded clusters, where every pass has something to replan."""
    nodes = [
        SnapshotNode(
            name=f"n{i}",
            gpus=draw(st.integers(1, 2)),
            cpus=2,
            memory_mb=2,
            usable=i == 0 or draw(st.integers(0, 4)) > 0,
        )
        for i in range(draw(st.integers(2, 3)))
    ]
    names = [node.name for node in nodes]
    # Two partitions that may share nodes, so grouping by shared nodes gets tested too.
    split = draw(st.integers(1, len(names) - 1))
    partitions = {"p": names[:split], "q": names[split - draw(st.integers(0, split)) :]}
    free = {node.name: [node.gpus, node.cpus, node.memory_mb] for node in nodes}
    jobs = []
    for job_id in range(draw(st.integers(0, 6))):
        node = draw(st.sampled_from(names))
        used = [draw(st.integers(0, have)) for have in free[node]]
        free[node] = [have - taken for have, taken in zip(free[node], used, strict=True)]
        jobs.append(
            RunningJob(
                job_id=job_id,
                user="u",
                partition="p",
                start_time=NOW - minutes(draw(st.integers(0, 6)) * 10),
                time_limit=draw(LIMITS),
                allocations=[Allocation(node=node, gpus=used[0], cpus=used[1], memory_mb=used[2])],
            )
        )
    queue = [
        PendingJob(job_id=100 + i, user="u", request=draw(SHAPES)) for i in range(draw(st.integers(1, 12)))
    ]
    estimates = RuntimeEstimates(
        remaining_s={job.job_id: draw(RUNTIMES) for job in jobs},
        runtime_s={job.job_id: draw(RUNTIMES) for job in queue},
    )
    state = QueueSnapshot(taken_at=NOW, nodes=nodes, partitions=partitions, running=jobs, pending=queue)
    window = draw(st.sampled_from([timedelta(minutes=45), timedelta(days=1)]))
    return state, estimates, draw(st.lists(SHAPES, min_size=1, max_size=2)), window


@settings(max_examples=500, deadline=None)
@given(queues())
def test_the_incremental_replay_plans_exactly_like_planning_from_scratch(
    case: tuple[QueueSnapshot, RuntimeEstimates, list[SlotRequest], timedelta],
) -> None:
    state, runtimes, candidates, window = case
    assert predict_starts(state, runtimes, candidates, NOW, window) == reference_starts(
        state, runtimes, candidates, window
    )


# --- remaining run times --------------------------------------------------------------------------------


def finished(
    partition: str, user: str, elapsed_min: float, limit_min: float | None, started: bool = True
) -> FinishedJob:
    return FinishedJob(
        job_id=1,
        array_job_id=None,
        array_task_id=None,
        name="job",
        user=user,
        partition=partition,
        state="COMPLETED",
        submit_time=NOW - 2 * HOUR,
        start_time=NOW - HOUR if started else None,
        end_time=NOW,
        elapsed=minutes(elapsed_min),
        time_limit=None if limit_min is None else minutes(limit_min),
        node_count=1,
        alloc_tres={},
        gpus=1,
        exit_code=0,
    )


def test_historical_ratios_take_medians_per_user_and_partition_and_fall_back_when_history_is_thin() -> None:
    history = [
        *[finished("a100", "alice", elapsed, 100) for elapsed in (10, 20, 30, 40, 50)],
        *[finished("a100", "bob", elapsed, 100) for elapsed in (90, 90, 90, 150)],  # overran: counts as 1.0
        finished("a100", "bob", 0, 100, started=False),  # cancelled while pending: never ran
        finished("a100", "bob", 5, None),  # no limit: no ratio
        *[finished("t4", "carol", 60, 100) for _ in range(2)],
    ]
    table = historical_ratios(history, min_jobs=5)
    assert table.by_user == {"a100": {"alice": 0.3}}
    assert table.by_partition == {"a100": 0.5}  # of 0.1 to 0.5, 0.9 three times and 1.0
    assert table.overall == 0.6
    assert table.ratio("alice", "a100") == 0.3
    assert table.ratio("bob", "a100") == 0.5
    assert table.ratio("carol", "t4") == 0.6  # two t4 jobs are too few for a t4 median
    assert historical_ratios([]).ratio("anyone", "a100") == 1.0  # no history: Slurm's own assumption


def test_remaining_time_prefers_the_advisors_prediction_and_never_passes_the_limit() -> None:
    def left(
        predicted: float | None, elapsed_min: float, limit_min: float | None = 60, ratio: float = 0.5
    ) -> float | None:
        limit = None if limit_min is None else minutes(limit_min)
        return remaining_seconds(
            time_limit=limit, elapsed=minutes(elapsed_min), ratio=ratio, predicted_total_s=predicted
        )

    assert left(predicted=1200, elapsed_min=5) == 900  # the prediction, minus what already ran
    assert left(predicted=1200, elapsed_min=19.5) == 60  # overran by a little: at least the minimum
    assert left(predicted=7200, elapsed_min=5) == 3300  # beyond the limit: the limit
    assert left(predicted=None, elapsed_min=10) == 1200  # half of a one-hour limit, minus ten minutes
    assert left(predicted=None, elapsed_min=59.5) == 30  # the limit comes before the minimum
    assert left(predicted=None, elapsed_min=70) == 0  # past its limit: ending now
    assert left(predicted=None, elapsed_min=10, limit_min=None) is None  # may run forever
    assert left(predicted=600, elapsed_min=0, limit_min=None) == 600


def test_runtime_estimates_cover_running_and_pending_jobs() -> None:
    state = snapshot(
        gpu_nodes("t4", 1, gpus=2),
        [running(1, "t4-1", 1, started=minutes(10), limit=HOUR), running(2, "t4-1", 1, minutes(10), HOUR)],
        [pending(3, "t4", 2, 2 * HOUR), pending(4, "t4", 2, 2 * HOUR)],
    )
    table = RatioTable(by_user={"t4": {"bob": 0.25}}, by_partition={"t4": 0.5})
    estimates = estimate_runtimes(state, NOW, table, {2: 900.0, 4: 1800.0})
    assert estimates.remaining_s == {1: 1200.0, 2: 300.0}  # alice: half an hour total; job 2 as predicted
    assert estimates.runtime_s == {3: 1800.0, 4: 1800.0}  # bob: a quarter of two hours; job 4 as predicted


# --- which wait source to trust ------------------------------------------------------------------------


def record(estimator: str, partition: str, error_min: float) -> WaitRecord:
    return WaitRecord.model_validate(
        {
            "estimator": estimator,
            "partition": partition,
            "predicted_start": NOW + minutes(error_min),
            "actual_start": NOW,
        }
    )


def test_the_source_with_the_smaller_median_error_is_preferred_per_partition() -> None:
    records = [
        *[record("slurm", "a100", error) for error in (30, -40, 50, 60, 70)],
        *[record("advisor", "a100", error) for error in (5, -10, 15, 200, 300)],
        *[record("slurm", "t4", error) for error in (1, 2, 3, 4, 5)],
        *[record("advisor", "t4", error) for error in (1, 2, 30, 40, 50)],
        *[record("advisor", "v100", 0) for _ in range(5)],  # Slurm's has no record here
        *[record(name, "cpu", error) for name in ("slurm", "advisor") for error in (60, 0, 0)],  # too few
    ]
    errors = {(found.partition, found.source): found for found in accuracies(records)}
    assert errors["a100", "slurm"].median_abs_error_s == 50 * 60
    assert errors["a100", "advisor"].median_abs_error_s == 15 * 60
    assert errors["a100", "advisor"].records == 5
    assert preferred_sources(records) == {
        "a100": "advisor",
        "t4": "slurm",
        "v100": "slurm",
        "cpu": "slurm",
    }
    assert preferred_sources(records, min_records=3)["cpu"] == "slurm"  # a tie keeps Slurm's
    assert preferred_sources([]) == {}
