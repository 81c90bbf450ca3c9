"""The twin's node rule (`scheduler.best_fit`) against the nodes real Slurm allocated in a replay.

Each allocation in a kept run's slurmctld log (the main scheduler's ``sched: Allocate`` lines and
backfill's ``_start_job: Started`` lines) is replayed on the nodes' occupancy as the log's own allocations
and ends leave it: a node is usable where its free GPUs hold the job's share and a CPU is free, in
``slurm.conf``'s node order. Backfill also leaves out the nodes its earlier slots hold, which the log does
not list, so its starts decide less than the main scheduler's; a node whose job is still completing takes
no job from the main scheduler, which the log does not say either. Usage: ``python -m
benchmarks.harness.twin_nodes OUTCOMES ROOT`` (a run's ``outcomes.json``, and the folder
``replay --keep`` kept its sandboxes in: ``ROOT/ARM/log/slurmctld.log``, ``ROOT/ARM/etc/slurm.conf``).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from advisor.slurm.values import expand_hostlist
from benchmarks.harness.model import ReplayOutcome
from benchmarks.harness.scheduler import best_fit, per_node_gpus

_NODE = re.compile(r"^NodeName=(\S+) .*\bCPUs=(\d+) .*\bGres=gpu:(?:\S+:)?(\d+)")
_PARTITION = re.compile(r"^PartitionName=(\S+) .*\bNodes=(\S+)")
_ALLOCATED = re.compile(
    r"(?:sched: Allocate JobId=(\d+) NodeList=(\S+) )|(?:_start_job: Started JobId=(\d+) in \S+ on (\S+))"
)
_ENDED = re.compile(r"_job_complete: JobId=(\d+) done")


@dataclass(frozen=True, slots=True)
class LoggedNode:
    """A node of a kept sandbox's `slurm.conf`."""

    partition: str
    index: int
    """Its place among its partition's nodes, in the order ``slurm.conf`` lists them (Slurm's)."""
    gpus: int
    cpus: int


@dataclass(slots=True)
class NodeChoices:
    """Per scheduler (``main``, ``backfill``): allocations the rule placed as Slurm did, and those it did
    not (job, nodes Slurm chose, nodes the rule chose); allocations no one can judge apart."""

    same: dict[str, int] = field(default_factory=lambda: {"main": 0, "backfill": 0})
    differ: dict[str, list[tuple[int, list[str], list[str]]]] = field(
        default_factory=lambda: {"main": [], "backfill": []}
    )
    unjudged: int = 0

    def judge(self, scheduler: str, job: int, chosen: list[str], rule: list[str]) -> None:
        if rule == chosen:
            self.same[scheduler] += 1
        else:
            self.differ[scheduler].append((job, chosen, rule))


def read_nodes(conf: Iterable[str]) -> dict[str, LoggedNode]:
    """Each node of ``slurm.conf``: its partition, place, GPUs and CPUs."""
    found: dict[str, tuple[int, int]] = {}
    member: dict[str, str] = {}
    for line in conf:
        if node := _NODE.match(line):
            found[node[1]] = int(node[3]), int(node[2])
        elif partition := _PARTITION.match(line):
            member.update(dict.fromkeys(expand_hostlist(partition[2]), partition[1]))
    places: dict[str, int] = {}
    nodes = {}
    for name, (gpus, cpus) in found.items():
        part = member.get(name, "")
        places[part] = places.get(part, -1) + 1
        nodes[name] = LoggedNode(part, places[part], gpus, cpus)
    return nodes


@dataclass(slots=True)
class _Occupancy:
    """What each node holds as the log goes: GPUs and jobs, by node name."""

    nodes: dict[str, LoggedNode]
    used: dict[str, tuple[int, int]]

    def hold(self, names: list[str], gpus: int, sign: int) -> None:
        for name in names:
            held_gpus, jobs = self.used[name]
            self.used[name] = held_gpus + sign * gpus, jobs + sign

    def rule(self, partition: str, count: int, gpus: int) -> list[str]:
        """The nodes `best_fit` gives ``count`` nodes x ``gpus`` in ``partition`` now."""
        mine = {node.index: name for name, node in self.nodes.items() if node.partition == partition}
        usable = [
            index
            for index, name in sorted(mine.items())
            if self.used[name][0] + gpus <= self.nodes[name].gpus
            and self.used[name][1] < self.nodes[name].cpus
        ]
        return [mine[index] for index in best_fit(usable, count)]


def node_choices(
    log: Iterable[str], nodes: dict[str, LoggedNode], asks: dict[int, tuple[int, int]]
) -> NodeChoices:
    """Replays the log's allocations of the jobs in ``asks`` (job id -> nodes, GPUs on each) against
    `best_fit`. A job not in ``asks`` (a rerun: its id is not recorded) holds GPUs no one knows: while it
    runs, its partition's allocations are not judged (``unjudged``)."""
    occupancy = _Occupancy(nodes, dict.fromkeys(nodes, (0, 0)))
    held: dict[int, tuple[list[str], int]] = {}
    unknown: dict[int, str] = {}
    choices = NodeChoices()
    for line in log:
        if allocated := _ALLOCATED.search(line):
            job = int(allocated[1] or allocated[3])
            chosen = sorted(expand_hostlist(allocated[2] or allocated[4]), key=lambda name: nodes[name].index)
            partition = nodes[chosen[0]].partition
            if job not in asks:
                unknown[job] = partition
            elif partition in unknown.values():
                choices.unjudged += 1
            else:
                choices.judge(
                    "main" if allocated[1] else "backfill", job, chosen, occupancy.rule(partition, *asks[job])
                )
            held[job] = chosen, asks.get(job, (0, 0))[1]
            occupancy.hold(*held[job], 1)
        elif (ended := _ENDED.search(line)) and int(ended[1]) in held:
            unknown.pop(int(ended[1]), None)
            occupancy.hold(*held.pop(int(ended[1])), -1)
    return choices


def asks_of(outcomes: Sequence[ReplayOutcome]) -> dict[int, tuple[int, int]]:
    """Job id -> (nodes, GPUs on each) of a real run's first submissions."""
    asks = {}
    for outcome in outcomes:
        config = outcome.decision.config
        if outcome.job_id is not None:
            asks[outcome.job_id] = config.nodes, per_node_gpus(config.gpus, config.nodes)
    return asks


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if len(words) != 2:
        print("usage: python -m benchmarks.harness.twin_nodes OUTCOMES_JSON KEPT_FOLDER", file=sys.stderr)
        return 2
    outcomes_path, root = Path(words[0]), Path(words[1])
    runs = json.loads(outcomes_path.read_text(encoding="utf-8"))
    for arm, raw in runs.items():
        outcomes = [ReplayOutcome.model_validate(outcome) for outcome in raw]
        folder = root / arm
        if not folder.is_dir():
            continue
        nodes = read_nodes((folder / "etc" / "slurm.conf").read_text().splitlines())
        with (folder / "log" / "slurmctld.log").open() as log:
            found = node_choices(log, nodes, asks_of(outcomes))
        for scheduler, same in found.same.items():
            differ = found.differ[scheduler]
            print(f"{arm}, {scheduler} scheduler: {same} allocations as the twin's rule, {len(differ)} not")
            for job, chosen, rule in differ[:4]:
                print(f"  job {job}: Slurm {','.join(chosen)}, the rule {','.join(rule)}")
        print(f"{arm}: {found.unjudged} allocations not judged (beside a rerun, whose GPUs are not recorded)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
