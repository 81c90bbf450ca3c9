"""A real daemon for the tests that talk to one: started on the sandbox cluster with trained predictors."""

from __future__ import annotations

import os
import pty
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from advisor.daemon.transport import UnixHTTPConnection
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient

from .recommend_support import trained_store

BIN = Path(sys.executable).parent
POLICY = 'mode = "rewrite"\n[rewrite]\nmin_gain_minutes = 5\n[tuning]\nchannels_last = false\n'
SCRIPT = """#!/bin/sh
#SBATCH --partition=t4
#SBATCH --gres=gpu:1
#SBATCH --time=12:00:00
#SBATCH --job-name={name}
#SBATCH --output=/dev/null
#ADVISOR --model=resnet18 --num-classes=10 --input-shape=3,32,32 --global-batch=64 --steps=100000
sleep 600
"""


class Daemon:
    def __init__(
        self, root: Path, env: dict[str, str], options: list[str] | None = None, config: Path | None = None
    ) -> None:
        """With ``config`` the daemon finds everything through its settings file, else through options."""
        self.root = root
        self.env = env
        self.options = options or []
        self.config = config
        self.socket = root / "advisor.sock"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.config is not None:
            argv = [str(BIN / "advisor"), "--config", str(self.config), "daemon", *self.options]
        else:
            argv = [str(BIN / "advisor"), "daemon", "--socket", str(self.socket)]
            argv += ["--db", str(self.root / "advisor.db"), "--policy", str(self.root / "policy.toml")]
            argv += ["--models-dir", str(self.root / "models"), *self.options]
        log = (self.root / "daemon.log").open("ab")
        self.process = subprocess.Popen(argv, env=self.env, stdout=log, stderr=log)
        deadline = time.monotonic() + 120
        while not self._healthy():
            assert self.process.poll() is None, (self.root / "daemon.log").read_text()
            assert time.monotonic() < deadline, "the daemon never answered"
            time.sleep(0.2)

    def _healthy(self) -> bool:
        """A socket file may be a dead daemon's; only an answer says this one listens."""
        connection = UnixHTTPConnection(self.socket, timeout=5)
        try:
            connection.request("GET", "/health")
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    def stop(self, how: int = signal.SIGTERM) -> int:
        """Its exit status; a daemon that has already ended (a test stopped it) is not signalled again."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(how)
        return self.process.wait(timeout=30)


def started_daemon(sandbox: Sandbox, root: Path, *options: str, **variables: str) -> Daemon:
    """A daemon with trained predictors and `POLICY`, given ``options`` of `advisor daemon` and more
    environment ``variables``."""
    trained_store(root)
    (root / "policy.toml").write_text(POLICY, encoding="utf-8")
    env = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "SLURM_CONF": sandbox.client_env()["SLURM_CONF"],
        "ADVISOR_ALLOW_ROOT": "1",  # the suite runs as root in CI; the service itself runs as its own user
        "ADVISOR_SOCKET": str(root / "advisor.sock"),
        "ADVISOR_TIMEOUT": "20",  # a loaded CI machine: the fail-open tests set their own
        **variables,
    }
    server = Daemon(root, env, list(options))
    server.start()
    return server


def serving_the_cluster(sandbox: Sandbox, root: Path, *options: str) -> Daemon:
    """`started_daemon` serving the cluster on a loopback port too (``SERVICE_PORT`` in its ``env``), its
    callers identified by the sandbox's munged."""
    port = free_port()
    server = started_daemon(
        sandbox,
        root,
        *options,
        ADVISOR_SERVICE_LISTEN=f"127.0.0.1:{port}",
        ADVISOR_MUNGE_SOCKET=str(sandbox.layout.munge_socket),
    )
    server.env["SERVICE_PORT"] = str(port)
    return server


def submit(
    daemon: Daemon, tmp_path: Path, *words: str, name: str = "train", **env: str
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / f"{name}.sbatch"
    if not script.exists():
        script.write_text(SCRIPT.format(name=name), encoding="utf-8")
    argv = [str(BIN / "advise-submit"), *words, str(script)]
    return subprocess.run(
        argv, env={**daemon.env, **env}, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


@contextmanager
def on_a_terminal(
    daemon: Daemon, tmp_path: Path, script: Path, stdout: int = subprocess.DEVNULL
) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """advise-submit with ``script``, its stdin and stderr a terminal 160 columns wide: the process, and
    the terminal's other end to read what it shows and to type into (both ends closed after)."""
    main, side = pty.openpty()
    try:
        wrapper = subprocess.Popen(
            [str(BIN / "advise-submit"), str(script)],
            env={**daemon.env, "COLUMNS": "160"},
            cwd=tmp_path,
            stdin=side,
            stderr=side,
            stdout=stdout,
            text=True,
        )
        yield wrapper, main
    finally:
        os.close(main)
        os.close(side)


def plain(shown: bytes) -> str:
    """What a terminal showed, as text without its colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", shown.decode(errors="replace"))


def jobs_named(slurm: SlurmClient, name: str) -> list[str]:
    return [job.partition for job in slurm.jobs() if job.name == name]


def free_port() -> int:
    """A loopback TCP port no one listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def munged_open_to_everyone(socket_path: Path) -> Iterator[None]:
    """munged's socket as a cluster's is, /run/munge: every user may reach it. (munge makes a credential
    for another uid as that uid, so the sandbox's private folders above the socket must let it through.)"""
    folders = [folder for folder in socket_path.parents if folder != Path("/")]
    modes = {folder: folder.stat().st_mode & 0o7777 for folder in folders}
    for folder, mode in modes.items():
        folder.chmod(mode | 0o001)
    try:
        yield
    finally:
        for folder, mode in modes.items():
            folder.chmod(mode)


def vm_rss(pid: int) -> int:
    """A process's resident memory in bytes, as the kernel counts it."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise LookupError(f"process {pid} has no VmRSS")


def libraries_loaded(daemon: Daemon, seconds: float = 120) -> str:
    """Waits for the daemon's background load of transformers and timm (`daemon/schedule.py`) and returns
    its log line: a measurement of the daemon's memory starts after it, as a deployed daemon's would."""
    log = daemon.root / "daemon.log"
    deadline = time.monotonic() + seconds
    while "model libraries loaded" not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
        time.sleep(0.2)
    return next(line for line in log.read_text().splitlines() if "model libraries loaded" in line)
