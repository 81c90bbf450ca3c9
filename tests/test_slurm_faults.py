"""Faults the adapter must turn into one clear SlurmError, never a hang: a frozen or dead controller."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from advisor.sandbox import processes
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner, SlurmError


@pytest.fixture
def controller_pid(sandbox: Sandbox) -> Iterator[int]:
    """slurmctld's pid; whatever the test does to it, the sandbox is whole again afterwards."""
    yield next(d.pid for d in sandbox.status().daemons if d.name == "slurmctld")
    sandbox.up()


def test_a_frozen_controller_trips_the_timeout(sandbox: Sandbox, controller_pid: int) -> None:
    client = SlurmClient(LocalRunner(env=sandbox.client_env()), timeout_s=2)
    os.kill(controller_pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(SlurmError) as caught:
            client.partitions()
        assert time.monotonic() - started < 10
        assert caught.value.returncode is None
        assert "timed out" in str(caught.value)
    finally:
        os.kill(controller_pid, signal.SIGCONT)
    assert client.partitions()


def test_a_stopped_controller_gives_a_clear_error(sandbox: Sandbox, controller_pid: int) -> None:
    client = SlurmClient(LocalRunner(env=sandbox.client_env()), timeout_s=30)
    os.kill(controller_pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while processes.is_ours(controller_pid, sandbox.layout.root) and time.monotonic() < deadline:
        time.sleep(0.1)
    started = time.monotonic()
    # Both at once: each command waits out Slurm's own retries (about 10 s) before it fails.
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs, partitions = pool.submit(client.jobs), pool.submit(client.partitions)
        with pytest.raises(SlurmError) as caught:
            jobs.result()
        with pytest.raises(SlurmError, match="Unable to contact slurm controller"):
            partitions.result()
    assert time.monotonic() - started < 30
    assert caught.value.returncode is not None
    assert "squeue" in str(caught.value)
    assert "failed while looking for jobs" in str(caught.value).lower()
    sandbox.up()
    assert {p.name for p in client.partitions()} == {p.name for p in sandbox.spec.partition}
