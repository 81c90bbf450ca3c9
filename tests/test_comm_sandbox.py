"""`advisor comm measure` as one real two-node Slurm job on the sandbox (gloo between two slurmds), stored
in a real SQLite store and shown as the partition's links."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from advisor.comm.cli import communicates
from advisor.comm.rows import CommunicationRows
from advisor.comm.sync import DEFAULT_COMMUNICATION
from advisor.sandbox.cluster import Sandbox
from advisor.settings.validated import BenchSettings
from advisor.slurm.client import SlurmClient
from advisor.store import ALLREDUCE, WHOLE_STEPS, Store

pytestmark = pytest.mark.slurm
BIN = Path(sys.executable).parent


def test_the_all_reduce_runs_across_two_nodes_as_one_job_and_stores_a_row_per_size(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    env = {**sandbox.client_env(), "PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path)}
    db = tmp_path / "advisor.db"
    measure = ["comm", "measure", "--partition", "a100", "--nodes", "2", "--tasks-per-node", "1"]
    # Up to 16 MiB: there the bytes outweigh a loaded sandbox's scheduling delays (a rank waiting 3 ms for a
    # CPU made 1-256 KiB slower than 1 MiB in one CI run, and no bandwidth could be fitted up to 4 MiB).
    measure += ["--cpu-only", "--max-bytes", str(2**24), "--results-dir", str(tmp_path / "comm")]
    # A job that hangs ends at its limit, which is shorter than the test's.
    measure += ["--models", "resnet18", "--db", str(db), "--minutes", "5"]
    advisor = str(BIN / "advisor")
    try:
        done = subprocess.run([advisor, *measure], env=env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"{expired.stdout!r}\n{_what_slurm_saw(sandbox, env, tmp_path / 'comm')}")
    assert done.returncode == 0, done.stdout + done.stderr + _what_slurm_saw(sandbox, env, tmp_path / "comm")
    assert "a100: job" in done.stdout and "COMPLETED" in done.stdout
    store = Store.open(db)
    rows = store.rows(ALLREDUCE)
    # 1 KiB, 4 KiB, ..., 16 MiB: eight sizes, once, over one rank on each of the two nodes.
    assert sorted(row.bytes for row in rows) == [2**10 * 4**i for i in range(8)]
    assert {(row.devices, row.nodes, row.partition) for row in rows} == {(2, 2, "a100")}
    assert all(row.network.startswith("gloo ") and row.bus_bytes_s > 0 for row in rows)
    (step,) = store.rows(WHOLE_STEPS)
    # torchvision's resnet18 (11,689,512 parameters) with the zoo's 10-class head instead of 1000 classes.
    assert step.model == "resnet18" and step.gradient_bytes == 4 * (11_689_512 - 513_000 + 5_130)
    links = CommunicationRows(store)
    assert links.communication("a100").measured
    assert links.communication("a100").node == DEFAULT_COMMUNICATION.node, "no node-level spread measured"
    assert links.communication("v100") == DEFAULT_COMMUNICATION
    shown = subprocess.run(
        [str(BIN / "advisor"), "comm", "show", "--db", str(db), "--partition", "a100", "--partition", "v100"],
        env={**env, "COLUMNS": "160"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "measured" in shown.stdout and "default (never measured)" in shown.stdout


def _what_slurm_saw(sandbox: Sandbox, env: dict[str, str], results: Path) -> str:
    """The queue, the nodes, the job's own log and slurmctld's last words: what a failure here needs."""
    shown = [
        subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60).stdout
        for argv in (["squeue", "-o", "%i %P %T %R %N"], ["sinfo", "-N", "-o", "%N %P %T %E"])
    ]
    logs = [path.read_text() for path in sorted(results.glob("*.log"))]
    slurmctld = (sandbox.layout.log / "slurmctld.log").read_text().splitlines()[-40:]
    return "\n".join([*shown, *logs, *slurmctld])


def test_by_default_every_partition_where_data_parallelism_can_span_devices_is_measured(
    local_slurm: SlurmClient,
) -> None:
    partitions = local_slurm.partitions()
    site = BenchSettings(cpu_only=True)
    chosen = {p.name for p in partitions if communicates(p, 2, site)}
    # a100 and v100: 4 GPUs a node, t4: 2, all on two nodes; cpu: one node without GPUs.
    assert chosen == {"a100", "v100", "t4"}
    skipping = BenchSettings(cpu_only=True, skip_partitions=["t4"])
    assert {p.name for p in partitions if communicates(p, 2, skipping)} == {"a100", "v100"}
