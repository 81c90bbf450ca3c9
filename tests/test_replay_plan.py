"""The scheduler's kept plan: at every arrival it answers ``--test-only`` as a plan made from scratch at that
instant would, however the events before it fell (ends, starts, submissions, the window moving on)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.wait.profile import INF, Profile
from benchmarks.harness.backfill import Backfill
from benchmarks.harness.model import (
    Arm,
    Arrival,
    Inventory,
    Job,
    Pool,
    QueueView,
    ReplayConfig,
    ReplayDecision,
    ReplayQuery,
)
from benchmarks.harness.scheduler import SimPartition, best_fit, per_node_gpus
from benchmarks.harness.simulate import SimulatedQueue, simulate

POOL = Pool(partition="p", gpu_type="t4", nodes=3, gpus_per_node=4)
#: (GPUs, nodes) a test job may ask
SHAPES = [(1, 1), (2, 1), (3, 1), (4, 1), (2, 2), (6, 2), (8, 2)]


def scratch_plan(partition: SimPartition, now: float) -> Profile:
    """The straightforward plan: running jobs held to their limits, the first pending jobs reserved in
    order, each from ``now``: a job starting now holds its GPUs and a CPU per node, a later slot its nodes
    whole; nodes chosen by Slurm's best fit."""
    backfill, nodes = partition.backfill, range(POOL.nodes)
    whole = (POOL.gpus_per_node, POOL.gpus_per_node, 0)
    held: list[list[tuple[float, tuple[int, int, int]]]] = [[] for _ in nodes]
    for attempt in partition.running:
        assert attempt.start_s is not None
        for node in attempt.nodes:
            held[node].append((attempt.start_s + backfill.planned(attempt.limit_s), (attempt.ask[1], 1, 0)))
    profile = Profile([whole] * POOL.nodes, now, held)
    for attempt in partition.pending[: backfill.max_jobs]:
        count, gpus = attempt.ask
        planned = backfill.planned(attempt.limit_s)
        begin, chosen = scratch_slot(profile, count, gpus, planned, now)
        if begin <= now + backfill.window_s:
            for node in chosen:
                profile.reserve(node, begin, begin + planned, (gpus, 1, 0) if begin == now else whole)
    return profile


def scratch_slot(
    profile: Profile, count: int, gpus: int, planned: float, now: float
) -> tuple[float, list[int]]:
    floors = [now] * POOL.nodes
    begin, _ = profile.earliest_on(range(POOL.nodes), count, (gpus, 1, 0), planned, floors, INF)
    if begin == INF:
        return INF, []
    usable = [
        n for n in range(POOL.nodes) if profile.earliest(n, (gpus, 1, 0), planned, begin, begin) == begin
    ]
    return begin, best_fit(usable, count)


def scratch_test_only(partition: SimPartition, query: ReplayQuery, now: float) -> float | None:
    profile = scratch_plan(partition, now)
    count, gpus = query.nodes, per_node_gpus(query.gpus, query.nodes)
    begin, _ = scratch_slot(profile, count, gpus, partition.backfill.planned(query.time_limit_s), now)
    return None if begin == INF else begin - now


def checking_arm(shapes: dict[str, tuple[int, int, float]], checked: list[int]) -> Arm:
    """Submits each job as drawn; first checks the kept plan against the plan from scratch."""

    def decide(job: Job, view: QueueView) -> ReplayDecision:
        assert isinstance(view, SimulatedQueue)
        partition = view.cluster["p"]
        queries = [
            ReplayQuery(partition="p", gpus=gpus, nodes=nodes, time_limit_s=limit)
            for gpus, nodes in SHAPES
            for limit in (15.0, 90.0)
        ]
        assert view.slurm_waits(queries) == [scratch_test_only(partition, q, view.now) for q in queries]
        checked.append(1)
        gpus, nodes, limit = shapes[job.arrival.name]
        config = ReplayConfig(gpu_type="t4", gpus=gpus, nodes=nodes, micro_batch=8, accumulation=1)
        return ReplayDecision(partition="p", config=config, time_limit_s=limit)

    return decide


jobs = st.lists(
    st.tuples(
        st.integers(0, 40),  # gap since the previous arrival
        st.sampled_from(SHAPES),
        st.sampled_from([10.0, 30.0, 60.0, 200.0]),  # limit
        st.integers(1, 220),  # true run
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(
    jobs,
    st.integers(1, 6),
    st.sampled_from([25.0, 100.0, 1000.0]),
    st.sampled_from([0.0, 20.0]),
)
def test_the_kept_plan_answers_like_a_plan_made_from_scratch(
    drawn: list[tuple[int, tuple[int, int], float, int]], max_jobs: int, window_s: float, resolution_s: float
) -> None:
    backfill = Backfill(window_s=window_s, max_jobs=max_jobs, limit_resolution_s=resolution_s)
    arrivals, shapes, now = [], {}, 0.0
    for index, (gap, (gpus, nodes), limit, run_s) in enumerate(drawn):
        now += gap
        name = f"j{index}"
        arrival = Arrival(name=name, time_s=now, application="toy", gpus=gpus, global_batch=8 * gpus)
        arrivals.append(Job(arrival=arrival, steps=run_s, user_gpu_type="t4", user_limit_s=400.0))
        shapes[name] = (gpus, nodes, limit)
    checked: list[int] = []
    arm = checking_arm(shapes, checked)
    inventory = Inventory(pools=[POOL])
    outcomes = simulate(
        arrivals, arm, "habits", inventory, lambda job, _: float(job.steps), backfill=backfill
    )
    assert len(checked) == len(arrivals) == len(outcomes)


def test_best_fit_picks_nodes_as_slurms_cons_tres_does() -> None:
    """Counted by hand: runs of consecutive usable nodes, the shortest run with enough nodes (the first of
    equals), its first nodes; else the longest run whole, then again. How full a node is does not count:
    Slurm caps a node's usable CPUs at the job's one task of one CPU."""
    usable = [0, 1, 2, 4]
    assert best_fit(usable, 1) == [4], "run [4] is shorter than run [0-2]"
    assert best_fit([0, 1, 3, 4], 1) == [0], "two runs of two: the first, and its first node"
    assert best_fit([0, 1, 3, 4, 5], 2) == [0, 1], "run [0-1] is shorter than run [3-5]"
    assert best_fit([0, 2, 3, 4, 6, 7], 2) == [6, 7], "[6-7] is shorter than [2-4]; [0] is too short"
    assert best_fit([0, 2, 3, 5], 3) == [0, 2, 3], "no run is long enough: the longest, then the first"
    assert best_fit([0, 2, 4], 3) == [0, 2, 4], "runs of one, in turn"


def test_a_later_slot_holds_its_nodes_whole() -> None:
    """Slurm's backfill plans pending jobs on whole nodes: a job that would fit beside a reservation's
    share of a node waits for the job to start (by hand: a holds node 0 until 100, b needs 2 GPUs on both
    nodes from 100, c asks 2 GPUs for 300 s at 1: beside b's share of node 1 it would start at once)."""
    pool = Pool(partition="p", gpu_type="t4", nodes=2, gpus_per_node=4)
    shapes = {"a": (0.0, 4, 1), "b": (0.0, 4, 2), "c": (1.0, 2, 1)}
    limits = {"a": 100.0, "b": 100.0, "c": 300.0}

    def decide(job: Job, view: QueueView) -> ReplayDecision:
        _, gpus, nodes = shapes[job.arrival.name]
        config = ReplayConfig(gpu_type="t4", gpus=gpus, nodes=nodes, micro_batch=8, accumulation=1)
        return ReplayDecision(partition="p", config=config, time_limit_s=limits[job.arrival.name])

    arrivals = [
        Job(
            arrival=Arrival(name=name, time_s=at, application="toy", gpus=gpus, global_batch=8 * gpus),
            steps=int(limits[name]),
            user_gpu_type="t4",
            user_limit_s=400.0,
        )
        for name, (at, gpus, _) in shapes.items()
    ]
    outcomes = simulate(arrivals, decide, "habits", Inventory(pools=[pool]), lambda job, _: float(job.steps))
    starts = {outcome.name: outcome.start_s for outcome in outcomes}
    assert starts == {"a": 0.0, "b": 100.0, "c": 100.0}, "c starts beside b once b runs, not at 1"
