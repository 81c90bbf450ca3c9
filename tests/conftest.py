"""Shared fixtures: one real sandbox Slurm cluster and one real sshd on loopback per test session."""

from __future__ import annotations

import gc
import getpass
import os
import random
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from advisor.introspect.table_cache import keep_tables_in
from advisor.sandbox.cluster import Sandbox
from advisor.sandbox.spec import SandboxSpec, load_spec
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner, SshRunner

REPO = Path(__file__).resolve().parent.parent
SANDBOX_CONFIG = REPO / "advisor" / "data" / "sandbox.toml"


def pytest_configure(config: pytest.Config) -> None:
    """Each fast-tier worker (pytest-xdist) on a core of its own, before torch is imported.

    Torch and the benchmark job size their thread pools from the affinity mask; two workers each running
    two threads on two shared cores wait for each other at every parallel region (a layer measurement ran
    ten times slower). Subprocesses inherit the mask, so a benchmark the tests start runs one thread too.
    The slurm tier's workers (``-m slurm``) keep every core: each starts a sandbox cluster, whose nodes
    would inherit the mask and offer their jobs one CPU.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and (config.getoption("markexpr") or "").strip() != "slurm":
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[int(worker[2:]) % len(cores)]})


_PORTS = range(10000, 16500)
"""Above Slurm's own (6817-6819), below the sandbox's default (16817), the all-reduce's rendezvous
(20000-29999) and the kernel's ephemeral ports (32768 up), one of which any outgoing connection may take
between a check and a bind (a slurmd once failed to start so)."""


def free_port_block(count: int) -> int:
    """A base port with `count` ports after it, all free now and in `_PORTS`, where nothing else binds."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(_PORTS.start, _PORTS.stop - count)
        if all(_port_free(port) for port in range(base, base + count)):
            return base
    raise RuntimeError("no free block of loopback ports")


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def sandbox_spec() -> SandboxSpec:
    spec = load_spec(SANDBOX_CONFIG)
    return spec.model_copy(update={"base_port": free_port_block(spec.port_count())})


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    cluster = Sandbox(sandbox_spec(), tmp_path_factory.mktemp("sandbox"))
    cluster.up()
    yield cluster
    cluster.down()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshEndpoint]:
    folder = tmp_path_factory.mktemp("sshd")
    port = free_port_block(1)
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
    (folder / "authorized_keys").chmod(0o600)
    config = folder / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {folder / 'host_key'}",
                f"PidFile {folder / 'sshd.pid'}",
                f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "PermitRootLogin prohibit-password",
                f"AllowUsers {getpass.getuser()}",
            ]
        )
        + "\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = (folder / "sshd.log").open("w")
    process = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(config)], stderr=log)
    deadline = time.monotonic() + 10
    while _port_free(port):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"sshd did not start: {(folder / 'sshd.log').read_text()}")
        time.sleep(0.05)
    known_hosts = folder / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {(folder / 'host_key.pub').read_text()}")
    yield SshEndpoint(port=port, key=folder / "client_key", known_hosts=known_hosts)
    process.terminate()
    process.wait(timeout=10)
    log.close()


@dataclass(frozen=True)
class SshEndpoint:
    port: int
    key: Path
    known_hosts: Path


@pytest.fixture(params=["local", "ssh"])
def slurm(request: pytest.FixtureRequest, sandbox: Sandbox) -> Iterator[SlurmClient]:
    """The adapter against the sandbox, once through a local subprocess and once over real SSH."""
    if request.param == "local":
        yield SlurmClient(LocalRunner(env=sandbox.client_env()), timeout_s=20)
        return
    endpoint: SshEndpoint = request.getfixturevalue("sshd")
    runner = SshRunner(
        host="127.0.0.1",
        port=endpoint.port,
        user=getpass.getuser(),
        key_filename=str(endpoint.key),
        env=sandbox.client_env(),
        known_hosts=str(endpoint.known_hosts),
    )
    yield SlurmClient(runner, timeout_s=20)
    runner.close()


@pytest.fixture
def local_slurm(sandbox: Sandbox) -> Iterator[SlurmClient]:
    """A local client to the sandbox that cancels every job when the test ends, so tests leave no queue."""
    client = SlurmClient(LocalRunner(env=sandbox.client_env()))
    yield client
    for job in client.jobs():
        client.cancel(job.job_id)


@pytest.fixture(autouse=True)
def _run_in_a_scratch_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs write slurm-N.out into the submitting folder: keep that out of the repository."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _no_table_folder_after_a_command() -> Iterator[None]:
    """A command run in this process names its layer-table folder for the process (`keep_tables_in`); the
    next test starts without one, as a fresh process does."""
    yield
    keep_tables_in(None)


REAL_CLUSTER_FIXTURES = {"sandbox", "sshd", "slurm", "local_slurm"}
"""A test that asks for one of these needs the sandbox cluster or the loopback sshd: the `slurm` tier."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks every test that reaches a real cluster, however it gets there, so `-m "not slurm"` is the
    fast tier; tests that start clusters of their own carry the marker themselves."""
    for item in items:
        if REAL_CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slurm)
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported lives as long as the run: freezing it keeps every `gc.collect()` a test
    reaches (the benchmark calls one after each measurement) from walking torch's and the suite's heap."""
    gc.freeze()
