"""Every way advise-submit is given a job, against a real daemon on the sandbox: each is advised or says in
one line why not, a dry run never submits, and a rewrite says what it applied whether or not on a terminal."""

from __future__ import annotations

import os
import re
import select
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient

from .daemon_support import BIN, SCRIPT, Daemon, jobs_named, on_a_terminal, plain, started_daemon, submit

pytestmark = pytest.mark.slurm

WRAP = "python train.py --model resnet18 --batch-size 64 --epochs 1 --data-path /datasets/cifar10"
"""torchvision's reference script: a command line the advisor infers a job description from."""


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    server = started_daemon(sandbox, tmp_path_factory.mktemp("paths-daemon"))
    yield server
    server.stop()


def _audited(daemon: Daemon) -> int:
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        return int(db.execute("SELECT COUNT(*) FROM audit").fetchone()[0])


def _wrapped(daemon: Daemon, tmp_path: Path, name: str, *words: str) -> subprocess.CompletedProcess[str]:
    argv = [str(BIN / "advise-submit"), *words, "--partition=t4", "--gres=gpu:1", "--time=12:00:00"]
    argv += [f"--job-name={name}", "--output=/dev/null", "--wrap", WRAP]
    return subprocess.run(argv, env=daemon.env, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def _ours(stderr: str) -> list[str]:
    """advise-submit's own lines, but for a kill warning (the job's 12-hour limit on t4)."""
    lines = stderr.splitlines()
    return [line for line in lines if line.startswith("advise-submit: ") and "likely killed" not in line]


def _said_once(result: subprocess.CompletedProcess[str]) -> str:
    """advise-submit's one line of its own, from a call that succeeded."""
    assert result.returncode == 0, result.stderr
    said = _ours(result.stderr)
    assert len(said) == 1, result.stderr
    return said[0]


def test_a_dry_run_of_a_wrap_command_is_advised_and_submits_nothing(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    before = _audited(daemon)
    result = _wrapped(daemon, tmp_path, "wrap-dry", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert jobs_named(local_slurm, "wrap-dry") == [], "a dry run submits nothing"
    assert "to start at" in result.stderr, "Slurm was asked with --test-only"
    said = _ours(result.stderr)
    assert len(said) == 1 and said[0].startswith("advise-submit: would apply: --partition=a100"), said
    assert _audited(daemon) == before, "a dry run is a preview, never audited"


def test_a_wrap_command_is_advised_and_goes_in_once_as_advised(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    result = _wrapped(daemon, tmp_path, "wrap-real")
    assert result.returncode == 0 and result.stdout.startswith("Submitted batch job "), result.stderr
    said = _ours(result.stderr)
    assert len(said) == 1 and said[0].startswith("advise-submit: applied: --partition=a100"), said
    assert jobs_named(local_slurm, "wrap-real") == ["a100"]


def test_off_a_terminal_a_rewrite_says_what_it_applied(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    result = submit(daemon, tmp_path, name="off-terminal")
    assert result.returncode == 0, result.stderr
    said = _ours(result.stderr)
    assert len(said) == 1 and re.fullmatch(
        r"advise-submit: applied: --partition=a100 --time=\S+ .*ADVISOR_MICRO_BATCH=64.*", said[0]
    ), result.stderr
    assert jobs_named(local_slurm, "off-terminal") == ["a100"]


def test_a_script_on_stdin_says_what_was_applied(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    result = subprocess.run(
        [str(BIN / "advise-submit")],
        input=SCRIPT.format(name="from-stdin"),
        env=daemon.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    said = _ours(result.stderr)
    assert len(said) == 1 and said[0].startswith("advise-submit: applied: --partition=a100"), said
    assert jobs_named(local_slurm, "from-stdin") == ["a100"]


def test_sbatchs_own_test_only_is_advised_as_a_dry_run(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    before = _audited(daemon)
    result = submit(daemon, tmp_path, "--test-only", name="test-only")
    assert result.returncode == 0 and "to start at" in result.stderr, result.stderr
    said = _ours(result.stderr)
    assert len(said) == 1 and said[0].startswith("advise-submit: would apply: --partition=a100"), said
    assert jobs_named(local_slurm, "test-only") == [] and _audited(daemon) == before


def test_a_dry_run_without_a_daemon_says_nothing_is_submitted(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    result = submit(daemon, tmp_path, "--dry-run", name="dry-no-daemon", ADVISOR_SOCKET=str(tmp_path / "x"))
    assert result.returncode == 0, result.stderr
    said = _ours(result.stderr)
    assert len(said) == 1 and "submitting" not in said[0], said
    assert said[0].endswith(
        "asking Slurm about the job unchanged (sbatch --test-only; a dry run submits nothing)"
    )
    assert jobs_named(local_slurm, "dry-no-daemon") == []


def test_an_array_says_what_was_done_with_it(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    said = _said_once(submit(daemon, tmp_path, "--array=0-1", name="array"))
    assert re.match(r"advise-submit: (applied|kept as written): \S", said), said
    # Once its tasks start, squeue lists each task apart: one array is one array job id.
    tasks = [job for job in local_slurm.jobs() if job.name == "array"]
    assert {job.array_job_id or job.job_id for job in tasks} == {tasks[0].array_job_id}, "submitted once"
    assert {job.partition for job in tasks} == {"a100"}


def _terminal_session(tmp_path: Path, daemon: Daemon, name: str, answer: bytes) -> tuple[str, int]:
    script = tmp_path / f"{name}.sbatch"
    script.write_text(SCRIPT.format(name=name), encoding="utf-8")
    with on_a_terminal(daemon, tmp_path, script) as (wrapper, main):
        shown, deadline = b"", time.monotonic() + 120
        while b"[Y/n]" not in shown:
            assert wrapper.poll() is None and time.monotonic() < deadline, shown.decode(errors="replace")
            shown += os.read(main, 65536)
        os.write(main, answer)
        code = wrapper.wait(timeout=120)
        while select.select([main], [], [], 1)[0]:  # what it said after the answer, until the pty is quiet
            try:
                shown += os.read(main, 65536)
            except OSError:
                break
    return plain(shown), code


def test_the_prompt_says_what_n_does_and_n_submits_the_job_as_written(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    text, code = _terminal_session(tmp_path, daemon, "prompt-no", b"n\n")
    assert code == 0, text
    prompt = text.splitlines()[-2] if "\n" in text.rstrip() else text
    assert "n: submit the job as written" in text and "Ctrl-C: submit nothing" in text, prompt
    assert "advise-submit: submitting the job as written" in text, text
    assert jobs_named(local_slurm, "prompt-no") == ["t4"]


def test_on_a_terminal_yes_says_what_was_applied_after_the_table(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    text, code = _terminal_session(tmp_path, daemon, "prompt-yes", b"y\n")
    assert code == 0, text
    answered = text[text.index("[Y/n]") :]
    assert re.search(r"^advise-submit: applied: --partition=a100 --time=\S+ ", answered, re.M), text
    assert jobs_named(local_slurm, "prompt-yes") == ["a100"]


def test_no_rewrite_says_what_was_not_applied_and_that_the_job_goes_in_as_written(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    said = _said_once(submit(daemon, tmp_path, "--no-rewrite", name="no-rewrite"))
    assert said.startswith("advise-submit: not applied (--no-rewrite): --partition=a100"), said
    assert said.endswith("; submitting it as written"), said
    assert jobs_named(local_slurm, "no-rewrite") == ["t4"]
