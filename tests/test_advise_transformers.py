"""Token and timm models through the real daemon (`tests.daemon_support`): plain sbatch's helper sends no
table, so the daemon builds what is library code (``timm:NAME``, a shipped ``hf:NAME``) itself; advise-submit
builds the table in the user's process (their folders and cache) and sends it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient

from .daemon_support import BIN, Daemon, jobs_named, started_daemon

pytestmark = pytest.mark.slurm

HEADER = "#!/bin/bash\n#SBATCH --partition=t4\n#SBATCH --gres=gpu:1\n#SBATCH --time=12:00:00\n"
TIMM = "python train.py /data/imagenet --model resnet50 -b 64 --grad-accum-steps 2 --epochs 90\n"
CLM = (
    "python run_clm.py --model_name_or_path gpt2 --dataset_name wikitext --dataset_config_name "
    "wikitext-2-raw-v1 --per_device_train_batch_size 8 --block_size 128 --num_train_epochs 1 --bf16\n"
)
HISTORY_ONLY = "history only"


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    server = started_daemon(sandbox, tmp_path_factory.mktemp("transformers-daemon"))
    yield server
    server.stop()


def _helper(daemon: Daemon, folder: Path, command: str) -> subprocess.CompletedProcess[str]:
    """The cli_filter's helper as the Lua runs it for ``sbatch --test-only job.sh`` (a preview)."""
    script = folder / "job.sh"
    script.write_text(HEADER + command, encoding="utf-8")
    options = folder / "options.json"
    options.write_text(json.dumps({"argv": [str(script)], "test-only": "set"}), encoding="utf-8")
    return subprocess.run(
        [str(BIN / "advisor-cli-filter"), "pre", str(options)],
        env=daemon.env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("command", [TIMM, CLM], ids=["timm", "hf"])
def test_plain_sbatch_of_a_library_model_is_predicted_by_the_daemon(
    daemon: Daemon, tmp_path: Path, command: str
) -> None:
    """Before, every ``timm:``/``hf:`` job through the filter was "your own code": history only (a timm
    ``--model resnet50`` job had been predicted as torchvision's)."""
    _helper(daemon, tmp_path, command)  # the daemon's first load of timm or transformers may outlast sbatch
    result = _helper(daemon, tmp_path, command)
    said = " ".join(result.stderr.split())
    assert result.returncode == 0 and "#end" in result.stdout, result.stderr
    assert "prediction" in said, "the daemon's reasons reach the terminal"
    for history in ("could not advise", "own code", HISTORY_ONLY):
        assert history not in said, said


def test_a_users_own_folder_through_the_filter_is_history_only_and_said_so(
    daemon: Daemon, tmp_path: Path
) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    result = _helper(daemon, tmp_path, CLM.replace("gpt2", str(tmp_path / "mine")))
    said = " ".join(result.stderr.split())
    assert "its config.json is read in your own process, not here" in said, said
    assert HISTORY_ONLY in said and "warning" not in said, said


def test_advise_submit_dry_run_of_an_hf_job_sends_its_table_and_submits_nothing(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    """advise-submit's child builds ``hf:gpt2`` on the meta device, offline; the daemon predicts from it."""
    script = tmp_path / "clm.sh"
    script.write_text(HEADER + "#SBATCH --job-name=clm-dry\n" + CLM, encoding="utf-8")
    argv = [str(BIN / "advise-submit"), "--dry-run", "--json", str(script)]
    env = {**daemon.env, "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)}
    result = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    advice = json.loads(result.stdout)["advice"]
    assert advice is not None, result.stderr
    recommendation = advice["recommendation"]
    assert recommendation["candidates"], recommendation["reasons"]
    assert all(c["model_version"] >= 1 and c["peak_memory_bytes"] > 0 for c in recommendation["candidates"])
    assert not any(HISTORY_ONLY in reason for reason in recommendation["reasons"])
    assert jobs_named(local_slurm, "clm-dry") == [], "a dry run submits nothing"
