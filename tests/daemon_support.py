"""A real daemon for the tests that talk to one: started on the sandbox cluster with trained predictors."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
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
        assert self.process is not None
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


def jobs_named(slurm: SlurmClient, name: str) -> list[str]:
    return [job.partition for job in slurm.jobs() if job.name == name]


def free_port() -> int:
    """A loopback TCP port no one listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
