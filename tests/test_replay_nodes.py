"""The twin's node rule judged against a real run's slurmctld log (`benchmarks.harness.twin_nodes`), on a
crafted log counted by hand."""

from benchmarks.harness.twin_nodes import LoggedNode, node_choices, read_nodes

CONF = [
    "NodeName=p-1 Port=1 CPUs=2 RealMemory=200 Gres=gpu:t4:4 State=UNKNOWN",
    "NodeName=p-2 Port=2 CPUs=2 RealMemory=200 Gres=gpu:t4:4 State=UNKNOWN",
    "NodeName=q-1 Port=3 CPUs=2 RealMemory=200 Gres=gpu:v100:8 State=UNKNOWN",
    "NodeName=p-3 Port=4 CPUs=2 RealMemory=200 Gres=gpu:t4:4 State=UNKNOWN",
    "PartitionName=p Nodes=p-1,p-2,p-3 Default=YES MaxTime=UNLIMITED State=UP",
    "PartitionName=q Nodes=q-1 Default=NO MaxTime=UNLIMITED State=UP",
]


def _line(second: int, text: str) -> str:
    return f"[2026-12-05T07:41:{second:02d}.100] {text}\n"


def test_nodes_are_read_in_slurm_conf_order_within_their_partition() -> None:
    nodes = read_nodes(CONF)
    assert nodes["p-3"] == LoggedNode(partition="p", index=2, gpus=4, cpus=2), "q-1 between does not count"
    assert nodes["q-1"] == LoggedNode(partition="q", index=0, gpus=8, cpus=2)


def test_each_allocation_is_judged_on_the_occupancy_the_log_leaves() -> None:
    asks = {1: (1, 2), 2: (1, 4), 3: (2, 2), 6: (1, 1), 7: (1, 1), 4: (1, 1), 5: (1, 4)}
    log = [
        _line(1, "sched: Allocate JobId=1 NodeList=p-2 #CPUs=1 Partition=p"),
        _line(2, "sched/backfill: _start_job: Started JobId=2 in p on p-1"),
        _line(3, "_job_complete: JobId=1 done"),
        _line(4, "sched: Allocate JobId=3 NodeList=p-[2-3] #CPUs=2 Partition=p"),
        _line(5, "sched: Allocate JobId=6 NodeList=p-2 #CPUs=1 Partition=p"),
        _line(6, "sched: Allocate JobId=7 NodeList=p-3 #CPUs=1 Partition=p"),
        _line(7, "sched: Allocate JobId=9 NodeList=q-1 #CPUs=1 Partition=q"),
        _line(8, "sched: Allocate JobId=4 NodeList=q-1 #CPUs=1 Partition=q"),
        _line(9, "_job_complete: JobId=9 done"),
        _line(10, "sched: Allocate JobId=5 NodeList=q-1 #CPUs=1 Partition=q"),
    ]
    found = node_choices(log, read_nodes(CONF), asks)
    # Job 1 (1 x 2 GPUs) on an idle partition: one run p-[1-3], its first node; Slurm took p-2.
    assert found.differ["main"] == [(1, ["p-2"], ["p-1"])]
    # Job 2 (1 x 4): p-2 holds 2 of 4, so runs [p-1], [p-3]: the first. Job 3 (2 x 2) after job 1 ended:
    # p-1 is full, run p-[2-3]. Job 6 (1 x 1): p-[2-3] both hold 2 of 4 GPUs, the first. Job 7 (1 x 1):
    # p-2 has GPUs left but both its CPUs are held, so p-3. Job 4 runs beside job 9, a rerun whose GPUs
    # are not recorded: not judged; job 5 after job 9 ended: q-1 (job 4 holds one GPU of 8).
    assert found.same == {"main": 4, "backfill": 1}
    assert found.unjudged == 1
