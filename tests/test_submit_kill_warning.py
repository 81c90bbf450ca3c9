"""A job likely killed at its limit, as advise-submit and `advisor explain` show it: a real daemon on the
sandbox, a job whose one-minute limit is shorter than its start-up alone.

The policy rewrites, and every other partition would get the same minute (a limit the policy may not raise
past 4x the user's), so each is likely killed too: the job goes in as written, once, with the warning.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient

from .daemon_support import BIN, SCRIPT, Daemon, jobs_named, on_a_terminal, plain, started_daemon, submit

SPAN = r"(\d+d \d\d:\d\d|\d\d:\d\d:\d\d)"
"""A span as people read it: HH:MM:SS, or days and HH:MM beyond a day."""
WARNED = re.compile(rf"as submitted, likely killed at 00:01:00: p90 run {SPAN}")


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    server = started_daemon(sandbox, tmp_path_factory.mktemp("kill-daemon"))
    yield server
    server.stop()


def short(tmp_path: Path, name: str) -> Path:
    """The daemon tests' job with a one-minute limit."""
    script = tmp_path / f"{name}.sbatch"
    text = SCRIPT.format(name=name).replace("--time=12:00:00", "--time=00:01:00")
    script.write_text(text, encoding="utf-8")
    return script


def test_off_a_terminal_advise_submit_warns_on_stderr_and_submits_as_written_once(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    short(tmp_path, "short-limit")
    result = submit(daemon, tmp_path, name="short-limit")
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if line.startswith("advise-submit: warning: ")]
    assert len(warned) == 1, result.stderr
    assert WARNED.search(warned[0]), warned
    assert jobs_named(local_slurm, "short-limit") == ["t4"], "never moved to where one minute kills it too"
    job_id = int(result.stdout.split()[-1])
    explained = subprocess.run(
        [str(BIN / "advisor"), "explain", str(job_id)],
        env={**daemon.env, "COLUMNS": "120"},
        capture_output=True,
        text=True,
    )
    assert explained.returncode == 0, explained.stderr
    lines = explained.stdout.splitlines()
    assert WARNED.fullmatch(lines[-1].removeprefix("warning: ")), explained.stdout
    passed_over = r"not chosen: a100 with 1 GPU, micro-batch 64(, AMP)?, likely killed at 00:01:00: p90 run "
    assert re.search(passed_over, explained.stdout), explained.stdout


def test_on_a_terminal_advise_submit_ends_its_table_with_the_warning(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    script = short(tmp_path, "short-limit-tty")
    with on_a_terminal(daemon, tmp_path, script, stdout=subprocess.PIPE) as (wrapper, main):
        shown, deadline = b"", time.monotonic() + 120
        while wrapper.poll() is None or select.select([main], [], [], 0)[0]:
            assert time.monotonic() < deadline, shown.decode(errors="replace")
            if select.select([main], [], [], 0.2)[0]:
                shown += os.read(main, 65536)
        stdout = wrapper.stdout.read() if wrapper.stdout else ""
    text = plain(shown)
    assert wrapper.returncode == 0, text
    assert "candidates, best first" in text and "[Y/n]" not in text, "kept as written: nothing to agree to"
    assert WARNED.search(text), text
    assert stdout.startswith("Submitted batch job ")
    assert jobs_named(local_slurm, "short-limit-tty") == ["t4"]
