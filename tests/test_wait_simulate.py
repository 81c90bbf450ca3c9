"""The wait estimators' pure parts: remaining run times, the backfill replay and the estimator choice."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.slurm.models import FinishedJob
from advisor.wait.accuracy import WaitRecord, estimator_errors, preferred_estimators
from advisor.wait.remaining import RatioTable, RuntimeEstimates, estimate_runtimes, historical_ratios, remaining_seconds
from advisor.wait.simulate import predict_starts
from advisor.wait.snapshot import Allocation, JobRequest, PendingJob, QueueSnapshot, RunningJob, SnapshotNode

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)


def minutes(count: float) -> timedelta:
    return timedelta(minutes=count)


def gpu_nodes(prefix: str, count: int, gpus: int = 4) -> list[SnapshotNode]:
    return [SnapshotNode(name=f"{prefix}-{i}", gpus=gpus, cpus=32, memory_mb=64000) for i in range(1, count + 1)]


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


def request(partition: str, gpus: int, limit: timedelta | None, nodes: int = 1) -> JobRequest:
    return JobRequest(partitions=[partition], nodes=nodes, gpus_per_node=gpus, cpus_per_node=gpus or 1, time_limit=limit)


def pending(job_id: int, partition: str, gpus: int, limit: timedelta, nodes: int = 1) -> PendingJob:
    return PendingJob(job_id=job_id, user="bob", request=request(partition, gpus, limit, nodes))


def snapshot(nodes: list[SnapshotNode], jobs: list[RunningJob], queue: list[PendingJob] = ()) -> QueueSnapshot:  # type: ignore[assignment]
    partitions: dict[str, list[str]] = {}
    for node in nodes:
        partitions.setdefault(node.name.split("-")[0], []).append(node.name)
    return QueueSnapshot(taken_at=NOW, nodes=nodes, partitions=partitions, running=jobs, pending=list(queue))


def at_limits(state: QueueSnapshot) -> RuntimeEstimates:
    """Every job runs to its limit: Slurm's own assumption."""
    return estimate_runtimes(state, NOW, RatioTable(), {})


def start_in(state: QueueSnapshot, runtimes: RuntimeEstimates, candidate: JobRequest) -> timedelta | None:
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
        [running(1, "t4-1", 2, started=timedelta(0), limit=HOUR), running(2, "t4-2", 1, timedelta(0), 3 * HOUR)],
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
    state = snapshot([first.model_copy(update={"usable": False}), second], [running(1, "a100-2", 4, HOUR, 2 * HOUR)])
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
    state: QueueSnapshot, runtimes: RuntimeEstimates, candidates: Sequence[JobRequest], window: timedelta
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
        (job.request, min(seconds(runtimes.runtime_s.get(job.job_id, seconds(job.request.time_limit))), seconds(job.request.time_limit)))
        for job in state.pending
    ]

    def fits(table: list, node: str, begin: float, end: float, amount: tuple[int, int, int]) -> bool:
        points = {begin} | {b for n, b, _, _ in table if n == node and begin < b < end}
        for point in points:
            used = [sum(a[k] for n, b, e, a in table if n == node and b <= point < e) for k in range(3)]
            if any(capacity[node][k] - used[k] < amount[k] for k in range(3)):
                return False
        return True

    def earliest(table: list, job: JobRequest, now: float) -> tuple[float, list[str]]:
        amount = (job.gpus_per_node, job.cpus_per_node, job.memory_mb_per_node)
        limit = seconds(job.time_limit)
        best: tuple[float, list[str]] = (math.inf, [])
        for partition in job.partitions:
            for start in sorted({now} | {e for _, _, e, _ in table if now < e < math.inf}):
                if start >= best[0]:
                    break
                fitting = [node for node in usable.get(partition, []) if fits(table, node, start, start + limit, amount)]
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
                table += [(node, start, start + seconds(job.time_limit), (job.gpus_per_node, job.cpus_per_node, job.memory_mb_per_node)) for node in nodes]
            if start == now:
                amount = (job.gpus_per_node, job.cpus_per_node, job.memory_mb_per_node)
                jobs.append((now + runtime, now + seconds(job.time_limit), [(node, amount) for node in nodes]))
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
    JobRequest,
    partitions=st.sampled_from([["p"], ["q"], ["p", "q"], ["q", "p"]]),
    nodes=st.integers(1, 2),
    gpus_per_node=st.integers(0, 2),
    cpus_per_node=st.integers(1, 2),
    memory_mb_per_node=st.integers(0, 1),
    time_limit=LIMITS,
)


@st.composite
def queues(draw: st.DrawFn) -> tuple[QueueSnapshot, RuntimeEstimates, list[JobRequest], timedelta]:
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
    for job_id in range(draw(st.integers(0, 5))):
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
    queue = [PendingJob(job_id=100 + i, user="u", request=draw(SHAPES)) for i in range(draw(st.integers(1, 10)))]
    estimates = RuntimeEstimates(
        remaining_s={job.job_id: draw(RUNTIMES) for job in jobs},
        runtime_s={job.job_id: draw(RUNTIMES) for job in queue},
    )
    state = QueueSnapshot(taken_at=NOW, nodes=nodes, partitions=partitions, running=jobs, pending=queue)
    window = draw(st.sampled_from([timedelta(minutes=45), timedelta(days=1)]))
    return state, estimates, draw(st.lists(SHAPES, min_size=1, max_size=2)), window


@settings(max_examples=300, deadline=None)
@given(queues())
def test_the_incremental_replay_plans_exactly_like_planning_from_scratch(
    case: tuple[QueueSnapshot, RuntimeEstimates, list[JobRequest], timedelta],
) -> None:
    state, runtimes, candidates, window = case
    assert predict_starts(state, runtimes, candidates, NOW, window) == reference_starts(state, runtimes, candidates, window)
