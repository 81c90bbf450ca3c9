"""The recommender on the real sandbox cluster: its partitions, its queue, `sbatch --test-only`, with
predictors from `tests/recommend_support.py`."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.comm.lines import AllReduceLine
from advisor.comm.rows import CommunicationRows
from advisor.comm.sync import Link, Spread
from advisor.introspect.run import introspect
from advisor.jobscript.submission import parse_submission
from advisor.policy.load import parse_policy
from advisor.policy.schema import Policy
from advisor.recommend.choose import Recommendation
from advisor.recommend.cluster import ClusterView
from advisor.recommend.edges import Sources, recommend_now
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner
from advisor.store import Store

from .recommend_support import trained_store

POLICY = """
mode = "rewrite"
[rewrite]
min_gain_fraction = 0.1
min_gain_minutes = 5
[tuning]
channels_last = false
[partitions.a100]
price_per_gpu_hour = 3.0
[partitions.v100]
price_per_gpu_hour = 1.5
[partitions.t4]
price_per_gpu_hour = 0.5
[users.student]
partitions = ["v100", "t4"]
[users.careful]
mode = "advise"
"""

SCRIPT = """#!/bin/sh
#SBATCH --partition={partition}
#SBATCH --gres=gpu:1
#SBATCH --time=2-00:00:00
#SBATCH --output=/dev/null
#ADVISOR --model=resnet18 --num-classes=10 --input-shape=3,32,32 --global-batch={batch} --steps={steps}
python train.py
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return trained_store(tmp_path_factory.mktemp("recommend"))


@pytest.fixture
def client(local_slurm: SlurmClient) -> SlurmClient:
    return local_slurm


def advise(
    client: SlurmClient,
    store: Store,
    tmp_path: Path,
    partition: str = "t4",
    batch: int = 32,
    steps: int = 100_000,
    user: str = "alice",
    policy: Policy | None = None,
    directives: str = "",
) -> Recommendation:
    """``directives``: more ``#SBATCH`` lines, after the script's own."""
    script = tmp_path / "train.sbatch"
    text = SCRIPT.format(partition=partition, batch=batch, steps=steps)
    script.write_text(text.replace("#SBATCH --output", f"{directives}#SBATCH --output"), encoding="utf-8")
    parsed = parse_submission(script, [], {})
    assert parsed.description is not None
    table = introspect(parsed.description.model, (3, 32, 32), {"num_classes": 10}, allow_factories=False)
    chosen_policy = policy or parse_policy(POLICY, "policy.toml")
    now = datetime.now(UTC)
    sources = Sources(ClusterView(client, lambda: now), store, chosen_policy, [])
    return recommend_now(sources, parsed, table, user, now)


def fill(client: SlurmClient, partition: str, gpus_per_node: int, nodes: int, minutes: int) -> None:
    for _ in range(nodes):
        options = [f"--partition={partition}", f"--gres=gpu:{gpus_per_node}", f"--time={minutes}"]
        client.submit("#!/bin/sh\nsleep 3000\n", [*options, "--output=/dev/null"])


def test_with_every_partition_idle_the_fastest_wins(
    client: SlurmClient, store: Store, tmp_path: Path
) -> None:
    result = advise(client, store, tmp_path)
    assert result.chosen is not None and result.chosen.candidate.partition == "a100"
    assert result.apply and result.advice is not None and result.advice.partition == "a100"
    assert {c.candidate.partition for c in result.candidates} == {"a100", "v100", "t4"}, "cpu has no GPUs"
    assert result.baseline is not None and result.baseline.candidate.partition == "t4"
    assert result.chosen.wait_s < 60 and result.chosen.run_s < result.baseline.run_s / 3
    assert "against" in result.reasons[0], result.reasons


def test_a_busy_partition_loses_to_a_slower_free_one_only_when_the_total_is_lower(
    client: SlurmClient, store: Store, tmp_path: Path
) -> None:
    fill(client, "a100", 4, 2, minutes=2 * 24 * 60)
    long_wait = advise(client, store, tmp_path, partition="a100")
    assert long_wait.chosen is not None and long_wait.chosen.candidate.partition == "v100", long_wait.reasons
    busy = next(
        c for c in long_wait.candidates if c.candidate.partition == "a100" and c.candidate.amp is False
    )
    assert busy.slurm_wait_s is not None and busy.slurm_wait_s > 24 * 3600, "held until the limits end"
    assert busy.advisor_wait_s is not None
    for job in client.jobs():
        client.cancel(job.job_id)

    fill(client, "a100", 4, 2, minutes=5)
    short_wait = advise(client, store, tmp_path, partition="a100")
    chosen = short_wait.chosen
    assert chosen is not None and chosen.candidate.partition == "a100", short_wait.reasons
    assert short_wait.advice is None or short_wait.advice.partition is None


def test_a_global_batch_that_does_not_fit_becomes_micro_batches(
    client: SlurmClient, store: Store, tmp_path: Path
) -> None:
    result = advise(client, store, tmp_path, batch=256, user="student")
    t4 = [c for c in result.candidates if c.candidate.partition == "t4" and c.fits]
    assert t4, "some split of the batch fits the small t4"
    for estimate in t4:
        split = estimate.candidate
        assert split.accumulation > 1 and split.micro_batch * split.accumulation * split.devices == 256
    assert result.baseline is not None and not result.baseline.fits


def test_forbidden_partitions_are_never_chosen_and_advise_mode_changes_nothing(
    client: SlurmClient, store: Store, tmp_path: Path
) -> None:
    student = advise(client, store, tmp_path, user="student")
    assert {c.candidate.partition for c in student.candidates} <= {"v100", "t4"}
    assert student.chosen is not None and student.chosen.candidate.partition == "v100"
    careful = advise(client, store, tmp_path, user="careful")
    assert careful.chosen is not None and careful.chosen.candidate.partition == "a100"
    assert not careful.apply and careful.advice is not None, "shown, never applied"
    assert "mode for partition a100 is advise" in careful.reasons[-1]


def test_recommend_command_prints_candidates_choice_and_explanation(
    sandbox: Sandbox,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SLURM_CONF", sandbox.client_env()["SLURM_CONF"])
    script = tmp_path / "train.sbatch"
    script.write_text(SCRIPT.format(partition="t4", batch=32, steps=100_000), encoding="utf-8")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    db = store.db.conn.execute("PRAGMA database_list").fetchone()[2]
    assert main(["recommend", "--policy", str(policy), "--db", db, str(script), "--json"]) == 0
    output = json.loads(capsys.readouterr().out)
    assert output["chosen"]["candidate"]["partition"] == "a100"
    assert output["advice"]["partition"] == "a100" and output["apply"] is True
    assert len(output["candidates"]) >= 3 and output["reasons"]


def test_a_cluster_without_trained_predictors_leaves_the_job_as_it_is(
    client: SlurmClient, tmp_path: Path
) -> None:
    empty = Store.open(tmp_path / "empty.db")
    result = advise(client, empty, tmp_path)
    assert result.candidates == [] and result.advice is None and not result.apply
    assert "advisor models train" in result.reasons[0]


def test_a_drained_partition_is_never_chosen(
    client: SlurmClient, store: Store, tmp_path: Path, sandbox: Sandbox
) -> None:
    admin = LocalRunner(env=sandbox.client_env())
    drain = ["scontrol", "update", "nodename=a100-[1-2]", "state=drain", "reason=advisor test"]
    assert admin.run(drain, timeout=20).returncode == 0
    try:
        result = advise(client, store, tmp_path)
        assert result.chosen is not None and result.chosen.candidate.partition == "v100", result.reasons
        assert "a100" not in {estimate.candidate.partition for estimate in result.candidates}
        assert "not considered, no node takes jobs: a100" in result.reasons
    finally:
        admin.run(["scontrol", "update", "nodename=a100-[1-2]", "state=resume"], timeout=20)
        serving(client, "a100")


def serving(client: SlurmClient, partition: str) -> None:
    """Waits until ``partition`` takes jobs again: a resumed node is not at once in service."""
    deadline = time.monotonic() + 60
    while not any(p.name == partition and p.takes_jobs for p in client.partitions()):
        assert time.monotonic() < deadline, f"{partition} never took jobs again"
        time.sleep(0.5)


def test_a_partition_closed_to_the_callers_groups_is_never_offered(
    client: SlurmClient, store: Store, tmp_path: Path, sandbox: Sandbox
) -> None:
    admin = LocalRunner(env=sandbox.client_env())
    serving(client, "a100")
    close = ["scontrol", "update", "partitionname=a100", "allowgroups=advisor-nobody"]
    assert admin.run(close, timeout=20).returncode == 0
    try:
        result = advise(client, store, tmp_path, user="root")
        assert result.chosen is not None and result.chosen.candidate.partition == "v100", result.reasons
        assert "a100" not in {estimate.candidate.partition for estimate in result.candidates}
        assert "not considered, a100: none of your groups may use it (AllowGroups)" in result.reasons
    finally:
        admin.run(["scontrol", "update", "partitionname=a100", "allowgroups=ALL"], timeout=20)


def test_a_job_whose_memory_only_the_largest_nodes_hold_stays_among_them(
    client: SlurmClient, store: Store, tmp_path: Path
) -> None:
    result = advise(client, store, tmp_path, partition="a100", directives="#SBATCH --mem=200G\n")
    assert {estimate.candidate.partition for estimate in result.candidates} == {"a100"}
    assert any(
        reason.startswith("not considered, v100: no node in service there has") for reason in result.reasons
    )


def _measured_link(store: Store, partition: str, bus_bytes_s: float, nodes: int = 1) -> None:
    """What `advisor comm measure` would store for a link of this bus bandwidth (the ``comm`` tests
    measure real ones): a ring's all-reduce at 2, 3 and 4 devices over ``nodes``, 1 KiB to 256 MiB."""
    link = Link(latency_s=50e-6, latency_per_device_s=0.0, bus_bytes_s=bus_bytes_s)
    when = datetime.now(UTC) + timedelta(seconds=nodes)  # one measurement per level, as one night
    lines = [
        AllReduceLine(
            partition=partition,
            machine="a100-machine",
            network="nccl a100-1",
            measured_at=when,
            spread=Spread(devices=devices, nodes=nodes),
            bytes=size,
            seconds=link.seconds(size, devices),
        )
        for devices in (2, 3, 4)
        if devices % nodes == 0
        for size in (2**10 * 4**i for i in range(10))
    ]
    CommunicationRows(store).ingest(lines)


def _advise_gpus(
    client: SlurmClient, store: Store, tmp_path: Path, shape: str, classes: int
) -> Recommendation:
    script = tmp_path / "ddp.sbatch"
    description = f"--model=resnet18 --num-classes={classes} --input-shape={shape}"
    description += " --global-batch=128 --steps=500"
    script.write_text(
        "#!/bin/sh\n#SBATCH --partition=a100\n#SBATCH --gres=gpu:4\n#SBATCH --time=2-00:00:00\n"
        f"#SBATCH --output=/dev/null\n#ADVISOR {description}\npython train.py\n",
        encoding="utf-8",
    )
    parsed = parse_submission(script, [], {})
    side = int(shape.split(",")[-1])
    table = introspect("resnet18", (3, side, side), {"num_classes": classes}, allow_factories=False)
    policy = parse_policy(POLICY.replace('[users.student]\npartitions = ["v100", "t4"]\n', ""), "policy.toml")
    now = datetime.now(UTC)
    return recommend_now(
        Sources(ClusterView(client, lambda: now), store, policy, []), parsed, table, "alice", now
    )


def test_a_communication_bound_job_is_advised_fewer_gpus_than_a_compute_bound_one(
    client: SlurmClient, store: Store, tmp_path: Path
) -> None:
    with sqlite3.connect(tmp_path / "advisor.db") as copy:
        store.db.conn.backup(copy)  # the module's store keeps no communication rows
    own = Store.open(tmp_path / "advisor.db")
    _measured_link(own, "a100", bus_bytes_s=0.25e9)
    # The same network: at 224x224 its steps (about 15 s on one of these GPUs) are long against the
    # all-reduce of its 45 MB of gradients (0.27 s); at 32x32 with a 100,000-class head (51 M more
    # parameters) the all-reduce of 250 MB (1.5 s) outweighs what more GPUs save of its 1.1 s step.
    compute = _advise_gpus(client, own, tmp_path, "3,224,224", 10)
    talk = _advise_gpus(client, own, tmp_path, "3,32,32", 100_000)
    on_a100 = [e for result in (compute, talk) for e in result.candidates if e.candidate.partition == "a100"]
    assert on_a100, (compute.reasons, talk.reasons)
    assert all(e.note is None or "communication never measured" not in e.note for e in on_a100)
    best = {
        name: min((e for e in result.candidates if e.candidate.partition == "a100"), key=lambda e: e.run_s)
        for name, result in (("compute", compute), ("talk", talk))
    }
    assert best["compute"].candidate.gpus == 4, best
    assert best["talk"].candidate.gpus < best["compute"].candidate.gpus, best
    talking = [e for e in talk.candidates if e.candidate.partition == "a100" and e.candidate.gpus > 1]
    assert talking and all(e.efficiency is not None and e.efficiency < 0.5 for e in talking)
    assert compute.chosen is not None and (compute.chosen.efficiency or 0) > 0.7
    # v100 never measured its communication: its multi-GPU candidates say so, at low confidence.
    unmeasured = [e for e in talk.candidates if e.candidate.partition == "v100" and e.candidate.gpus > 1]
    assert unmeasured and all(e.confidence == "low" for e in unmeasured)
    assert all(e.note is not None and "communication never measured" in e.note for e in unmeasured)


def test_gpus_free_on_two_nodes_start_a_job_that_would_wait_for_one_whole_node(
    client: SlurmClient, store: Store, tmp_path: Path
) -> None:
    with sqlite3.connect(tmp_path / "advisor.db") as copy:
        store.db.conn.backup(copy)
    own = Store.open(tmp_path / "advisor.db")
    when = datetime.now(UTC)
    CommunicationRows(own).ingest(
        AllReduceLine(
            partition="a100",
            machine="a100-machine",
            network="nccl a100-[1-2]",
            measured_at=when,
            spread=Spread(devices=devices, nodes=nodes),
            bytes=size,
            seconds=Link(latency_s=20e-6, latency_per_device_s=0, bus_bytes_s=bus).seconds(size, devices),
        )
        for devices, nodes, bus in ((2, 1, 100e9), (4, 1, 100e9), (2, 2, 25e9), (4, 2, 25e9))
        for size in (2**10 * 4**i for i in range(10))
    )
    for node in ("a100-1", "a100-2"):  # two of each node's four GPUs busy for a day
        client.submit(
            "#!/bin/sh\nsleep 3000\n",
            [
                "--partition=a100",
                "--gres=gpu:2",
                f"--nodelist={node}",
                "--time=1-00:00:00",
                "--mem=1000",
                "--output=/dev/null",
            ],
        )
    deadline = time.monotonic() + 60
    while sum(job.state == "RUNNING" for job in client.jobs()) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    try:
        policy = parse_policy(POLICY.replace("[tuning]\n", "[tuning]\nmax_nodes = 2\n"), "policy.toml")
        result = advise(
            client,
            own,
            tmp_path,
            partition="a100",
            batch=64,
            policy=policy,
            directives="#SBATCH --gres=gpu:4\n#SBATCH --mem=8000\n",
        )
    finally:
        for job in client.jobs():
            client.cancel(job.job_id)
    assert result.chosen is not None, result.reasons
    chosen = result.chosen.candidate
    assert (chosen.partition, chosen.gpus, chosen.nodes) == ("a100", 2, 2), result.reasons
    assert result.advice is not None and result.advice.nodes == 2 and result.advice.gpus == 2
    assert result.chosen.efficiency is not None and result.chosen.efficiency > 0.7
    whole_node = [
        e
        for e in result.candidates
        if (e.candidate.partition, e.candidate.gpus, e.candidate.nodes) == ("a100", 4, 1)
    ]
    assert whole_node and all(e.wait_s > result.chosen.wait_s for e in whole_node)
