"""`[slurm] mode = "ssh"`: the daemon and `advisor status` reach Slurm through a login node's sshd.

Both run with no Slurm command on their PATH, so every answer that needed Slurm came over SSH; the user's
own sbatch still runs locally, as the user, from advise-submit.
"""

from __future__ import annotations

import getpass
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient

from .conftest import SshEndpoint
from .daemon_support import BIN, POLICY, Daemon, jobs_named, submit
from .recommend_support import trained_store

NO_SLURM_PATH = str(BIN)
"""The venv's scripts only: sinfo, squeue and sbatch are in /usr/bin."""


def settings_file(root: Path, sandbox: Sandbox, sshd: SshEndpoint) -> Path:
    path = root / "advisor.toml"
    path.write_text(
        f"""state_dir = "{root}"
socket = "{root / "advisor.sock"}"
policy = "{root / "policy.toml"}"
timeout_s = 20

[slurm]
mode = "ssh"
host = "127.0.0.1"
port = {sshd.port}
user = "{getpass.getuser()}"
key = "{sshd.key}"
known_hosts = "{sshd.known_hosts}"
env = {{ SLURM_CONF = "{sandbox.client_env()["SLURM_CONF"]}" }}
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def remote_daemon(
    sandbox: Sandbox, sshd: SshEndpoint, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    root = tmp_path_factory.mktemp("ssh-daemon")
    trained_store(root)
    (root / "policy.toml").write_text(POLICY, encoding="utf-8")
    config = settings_file(root, sandbox, sshd)
    env = {"PATH": NO_SLURM_PATH, "ADVISOR_CONFIG": str(config), "ADVISOR_ALLOW_ROOT": "1"}
    server = Daemon(root, env, config=config)
    server.start()
    yield server
    server.stop()


def test_status_reads_the_queue_over_ssh(remote_daemon: Daemon) -> None:
    assert remote_daemon.config is not None
    argv = [str(BIN / "advisor"), "--config", str(remote_daemon.config), "status", "--json"]
    shown = subprocess.run(argv, env={"PATH": NO_SLURM_PATH}, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["daemon"]["ok"]
    queue = {row["partition"]: row for row in report["queue"]}
    assert {"a100", "v100", "t4"} <= set(queue)
    assert queue["a100"]["gpus"] > 0
    assert {row["partition"] for row in report["benchmarks"]} == {"a100", "v100", "t4"}, "the file's database"
    assert len(report["models"]) == 3


def test_an_advised_submission_asks_slurm_over_ssh(
    remote_daemon: Daemon, sandbox: Sandbox, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    user_env = {"PATH": f"{BIN}:/usr/bin:/bin", "SLURM_CONF": sandbox.client_env()["SLURM_CONF"]}
    result = submit(remote_daemon, tmp_path, "--yes", "--json", name="remote", **user_env)
    assert result.returncode == 0, result.stderr
    advice = json.loads(result.stdout)["advice"]
    chosen = advice["recommendation"]["chosen"]
    assert chosen["candidate"]["partition"] == "a100", "the idle fastest partition, seen through SSH"
    assert chosen["slurm_wait_s"] is not None, "sbatch --test-only answered, over SSH"
    assert jobs_named(local_slurm, "remote") == ["a100"], "submitted once, by the user's own sbatch"
    log = (remote_daemon.root / "daemon.log").read_text()
    assert "executable not found" not in log
