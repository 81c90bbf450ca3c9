"""The shipped recording still is what the sandbox answers: recorded again, it reads the same way.

Job ids, times and other tests' jobs differ between runs; what the adapter's users rely on does not.
"""

from __future__ import annotations

from datetime import UTC, datetime

from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner
from advisor.slurm.testing import RecordedRunner

from .slurm_recording import RECORDING, recorded


def _reading(client: SlurmClient) -> dict[str, object]:
    partitions = client.partitions()
    jobs = {job.name: job.state for job in client.jobs() if job.name in ("run", "wait")}
    return {
        "partitions": [(p.name, p.gpu_type, p.gpus_per_node, p.node_names, p.max_time) for p in partitions],
        "nodes": sorted((node.name, node.gpus, node.cpus) for node in client.nodes()),
        "jobs": jobs,
        "test_only": client.test_only("#!/bin/sh\ntrue\n", ["--partition=t4"]).partition,
        "finished": "done" in {job.name for job in client.history(datetime(2026, 1, 1, tzinfo=UTC))},
        "account": client.default_account("root") is not None,
    }


def test_a_fresh_recording_of_the_sandbox_reads_like_the_shipped_one(sandbox: Sandbox) -> None:
    fresh = RecordedRunner(recorded(LocalRunner(env=sandbox.client_env())))
    shipped = RecordedRunner.load(RECORDING)
    assert _reading(SlurmClient(fresh)) == _reading(SlurmClient(shipped))
