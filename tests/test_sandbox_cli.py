"""`advisor sandbox up|down|status` end to end, on a cluster of its own, through the console script."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.sandbox import processes

from .conftest import free_port_block

SMALL_CLUSTER = """
name = "mini"
base_port = {base_port}

[[partition]]
name = "gpu"
gpu_type = "l4"
gpus_per_node = 2
nodes = 1
cpus_per_node = 4
memory_mb = 8000
max_time = "1:00:00"

[[partition]]
name = "cpu"
nodes = 1
cpus_per_node = 2
memory_mb = 4000
default = true
"""

ADVISOR = str(Path(sys.executable).parent / "advisor")


def advisor(*args: str, root: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ADVISOR, "sandbox", *args, "--dir", str(root), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.fixture
def cluster_files(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "mini.toml"
    config.write_text(SMALL_CLUSTER.format(base_port=free_port_block(5)))
    return tmp_path / "state", config


@pytest.mark.slurm
def test_up_twice_then_down_leaves_nothing_behind(cluster_files: tuple[Path, Path]) -> None:
    root, config = cluster_files
    first = advisor("up", root=root, config=config)
    assert first.returncode == 0, first.stderr
    try:
        env = {**os.environ, "SLURM_CONF": str(root / "etc" / "slurm.conf")}
        sinfo = subprocess.run(
            ["sinfo", "--noheader", "--format=%P %t %G %D"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert sorted(sinfo.stdout.split("\n")[:-1]) == ["cpu* idle (null) 1", "gpu idle gpu:l4:2 1"]
        pids_before = set(processes.marked_pids(root.resolve()))

        again = advisor("up", root=root, config=config)
        assert again.returncode == 0, again.stderr
        assert set(processes.marked_pids(root.resolve())) == pids_before

        status = advisor("status", root=root, config=config)
        assert status.returncode == 0
        for daemon in ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd-gpu-1", "slurmd-cpu-1"):
            assert daemon in status.stdout
        assert "2 x l4" in status.stdout

        job = subprocess.run(
            ["sbatch", "--parsable", "-p", "gpu", "--gpus=1", "--mem=50", "--wrap", "sleep 317"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert job.stdout.strip().isdigit()
    finally:
        down = advisor("down", root=root, config=config)
    assert down.returncode == 0, down.stderr
    assert "slurmctld" in down.stdout
    assert processes.marked_pids(root.resolve()) == []
    assert not _sleepers_left()
    status = advisor("status", root=root, config=config)
    assert status.returncode == 3
    assert "no sandbox runs" in status.stdout


@pytest.mark.slurm
def test_a_busy_port_is_named_and_nothing_is_left_running(cluster_files: tuple[Path, Path]) -> None:
    root, config = cluster_files
    base_port = int(config.read_text().split("base_port = ")[1].split()[0])
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", base_port))
        squatter.listen()
        result = advisor("up", root=root, config=config)
    assert result.returncode == 1
    assert f"{base_port} (slurmctld)" in result.stderr
    assert processes.marked_pids(root.resolve()) == []


def test_a_bad_description_is_refused_before_anything_starts(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[[partition]]\nname = 'gpu'\nnodes = 1\n")
    result = advisor("up", root=tmp_path / "state", config=config)
    assert result.returncode == 1
    assert str(config) in result.stderr
    assert "cpus_per_node" in result.stderr
    assert not (tmp_path / "state").exists()


def _sleepers_left() -> bool:
    pgrep = shutil.which("pgrep")
    assert pgrep is not None
    return subprocess.run([pgrep, "-f", "^sleep 317$"], capture_output=True, check=False).returncode == 0
