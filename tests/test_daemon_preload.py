"""`preload_model_libraries = false`: a site whose users run no ``hf:``/``timm:`` jobs keeps the memory
transformers and timm take; the daemon imports them only when a job needs them (its own import log, by
Python's ``PYTHONPROFILEIMPORTTIME``, says what it imported and when)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.sandbox.cluster import Sandbox
from advisor.settings import SettingsError, load_settings

from .daemon_support import Daemon, started_daemon
from .test_advise_transformers import TIMM, _helper

pytestmark = pytest.mark.slurm

LEFT = "model libraries left to the first hf:/timm: job (preload_model_libraries = false)"
TORCHVISION = "#ADVISOR --model=resnet18 --input-shape=3,32,32 --global-batch=64 --steps=100\ntrue\n"


def imported(daemon: Daemon) -> set[str]:
    """The top-level packages the daemon has imported so far, from its import log."""
    lines = (daemon.root / "daemon.log").read_text(errors="replace").splitlines()
    found = (re.match(r"import time:\s+\d+ \|\s+\d+ \|\s+([\w.]+)", line) for line in lines)
    return {match.group(1).strip().split(".")[0] for match in found if match is not None}


def predicted(daemon: Daemon, folder: Path, command: str) -> bool:
    """Whether plain sbatch's helper is given a prediction for ``command``: the first answer may outlast
    sbatch's wait (the daemon's first table loads torch, on a busy CPU), the daemon keeps building it."""
    for _ in range(3):
        said = " ".join(_helper(daemon, folder, command).stderr.split())
        if "prediction" in said:
            return True
    return False


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    root = tmp_path_factory.mktemp("no-preload")
    # Its own tables folder: a table kept from an earlier run would spare the timm: job its import.
    settings = f'preload_model_libraries = false\ntables_dir = "{root / "tables"}"\n'
    (root / "advisor.toml").write_text(settings, encoding="utf-8")
    server = started_daemon(
        sandbox, root, ADVISOR_CONFIG=str(root / "advisor.toml"), PYTHONPROFILEIMPORTTIME="1"
    )
    server.env.pop("PYTHONPROFILEIMPORTTIME")  # the daemon's log only, not its callers'
    yield server
    server.stop()


def test_without_preload_the_daemon_imports_transformers_and_timm_only_for_a_job_that_needs_them(
    daemon: Daemon, tmp_path: Path
) -> None:
    deadline = time.monotonic() + 60
    while LEFT not in (daemon.root / "daemon.log").read_text(errors="replace"):
        assert time.monotonic() < deadline, "the daemon's start does not say the libraries are left"
        time.sleep(0.2)
    assert {"torch", "torchvision"} <= imported(daemon), "what every job needs is loaded at the start"
    assert {"transformers", "timm"}.isdisjoint(imported(daemon))
    assert predicted(daemon, tmp_path, TORCHVISION)
    assert {"transformers", "timm"}.isdisjoint(imported(daemon))
    assert predicted(daemon, tmp_path, TIMM)
    assert "timm" in imported(daemon), "the timm: job's table was built with timm"
    assert "model libraries loaded" not in (daemon.root / "daemon.log").read_text(errors="replace")


def test_the_setting_is_a_flag_on_by_default(tmp_path: Path) -> None:
    assert load_settings({"HOME": str(tmp_path)}).preload_model_libraries is True
    path = tmp_path / "advisor.toml"
    path.write_text("preload_model_libraries = false\n", encoding="utf-8")
    assert load_settings({}, path).preload_model_libraries is False
    path.write_text('\npreload_model_libraries = "later"\n', encoding="utf-8")
    with pytest.raises(SettingsError, match=rf"{path}:2: preload_model_libraries: Input should be a valid"):
        load_settings({}, path)
