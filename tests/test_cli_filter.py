"""Plain sbatch, advised: the real sbatch with Slurm's cli_filter/lua plugin loaded, the advisor's Lua and
helper, a real daemon. Every test counts the jobs Slurm received: a job is submitted exactly once."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.cli_filter import install, sbatch_words
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient

from .daemon_support import BIN, SCRIPT, Daemon, jobs_named, started_daemon
from .fake_daemon import Script, serving


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    server = started_daemon(sandbox, tmp_path_factory.mktemp("filter-daemon"))
    yield server
    server.stop()


def _filtered_conf(sandbox: Sandbox, folder: Path, helper: Path | None = None, timeout_s: float = 20) -> Path:
    """The sandbox's slurm.conf with the filter enabled, beside its own cli_filter.lua: sbatch loads both.
    The helper is the advisor's own, as installed by default, unless a fake one is given."""
    conf = Path(sandbox.client_env()["SLURM_CONF"]).read_text(encoding="utf-8")
    (folder / "slurm.conf").write_text(conf + "\nCliFilterPlugins=cli_filter/lua\n", encoding="utf-8")
    install(folder, helper, timeout_s)
    return folder / "slurm.conf"


@pytest.fixture(scope="module")
def filtered(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _filtered_conf(sandbox, tmp_path_factory.mktemp("filter-conf"))


def _sbatch(
    daemon: Daemon,
    conf: Path,
    tmp_path: Path,
    name: str,
    body: str = "sleep 600",
    words: tuple[str, ...] = (),
    **env: str,
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / f"{name}.sbatch"
    script.write_text(SCRIPT.format(name=name).replace("sleep 600", body), encoding="utf-8")
    environment = {**daemon.env, "SLURM_CONF": str(conf), **env}
    argv = ["sbatch", *words, str(script)]
    return subprocess.run(argv, env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def _fake_helper(tmp_path: Path, body: str) -> Path:
    """A helper on a fixed path that runs ``body``: faults the real one cannot be made to produce."""
    helper = tmp_path / "fake-helper"
    helper.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    helper.chmod(0o755)
    return helper


def _show(local_slurm: SlurmClient, job_id: int) -> dict[str, str]:
    return local_slurm.show_job(job_id)


def test_plain_sbatch_is_rewritten_per_policy_with_the_advice_in_its_environment(
    daemon: Daemon, filtered: Path, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    out = tmp_path / "env.out"
    body = f"env | grep ^ADVISOR_ > {out}"
    result = _sbatch(daemon, filtered, tmp_path, "plain-advised", body)
    assert result.returncode == 0 and result.stdout.startswith("Submitted batch job "), result.stderr
    job_id = int(result.stdout.split()[-1])
    assert jobs_named(local_slurm, "plain-advised") in (["a100"], []), "moved to the fastest partition, once"
    shown = _show(local_slurm, job_id)
    assert shown["Partition"] == "a100" and shown["TimeLimit"] != "12:00:00"
    assert "advisor: applied: --partition=a100" in result.stderr, result.stderr
    deadline = time.monotonic() + 90
    while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
        time.sleep(1)
    variables = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert variables["ADVISOR_MICRO_BATCH"] == "64" and variables["ADVISOR_GLOBAL_BATCH"] == "64"
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        rows = db.execute("SELECT applied FROM audit WHERE job_id = ?", [job_id]).fetchall()
    assert rows == [(1,)], "the post-submit hook linked the job to its advice"


def test_advise_submit_under_the_filter_advises_once(
    daemon: Daemon, filtered: Path, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        (before,) = db.execute("SELECT COUNT(*) FROM audit").fetchone()
    script = tmp_path / "wrapped.sbatch"
    script.write_text(SCRIPT.format(name="wrapped"), encoding="utf-8")
    env = {**daemon.env, "SLURM_CONF": str(filtered)}
    result = subprocess.run(
        [str(BIN / "advise-submit"), "--yes", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert jobs_named(local_slurm, "wrapped") == ["a100"]
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        (after,) = db.execute("SELECT COUNT(*) FROM audit").fetchone()
    assert after == before + 1 and "advisor: applied" not in result.stderr


def test_a_job_likely_killed_at_its_limit_is_warned_of_and_goes_in_as_written(
    daemon: Daemon, filtered: Path, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    """A one-minute limit, shorter than the job's start-up: every partition would get the same minute, so
    the job stays, and plain sbatch says why."""
    script = tmp_path / "short-limit.sbatch"
    script.write_text(
        SCRIPT.format(name="filter-short-limit").replace("12:00:00", "00:01:00"), encoding="utf-8"
    )
    result = subprocess.run(
        ["sbatch", str(script)],
        env={**daemon.env, "SLURM_CONF": str(filtered)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and result.stdout.startswith("Submitted batch job "), result.stderr
    warned = [line for line in result.stderr.splitlines() if "as submitted, likely killed" in line]
    assert len(warned) == 1, result.stderr
    assert re.fullmatch(
        r"advisor: warning: as submitted, likely killed at 00:01:00: p90 run (\d+d \d\d:\d\d|\d\d:\d\d:\d\d)",
        warned[0],
    )
    assert "advisor: applied" not in result.stderr
    assert jobs_named(local_slurm, "filter-short-limit") == ["t4"]


@pytest.mark.parametrize("fault", ["no daemon", "opted out", "garbage", "crash", "hang"])
def test_every_fault_leaves_the_job_as_written_submitted_once(
    daemon: Daemon, sandbox: Sandbox, local_slurm: SlurmClient, tmp_path: Path, fault: str
) -> None:
    helper, env, timeout_s = None, {}, 20.0
    if fault == "no daemon":
        env = {"ADVISOR_SOCKET": str(tmp_path / "nobody.sock")}
    elif fault == "opted out":
        env = {"ADVISOR_OFF": "1"}
    else:
        lines = {"garbage": "echo 'partition\ta100'; echo 'rm -rf /'; echo '#end'", "crash": "exit 3"}
        helper = _fake_helper(tmp_path, lines.get(fault, "sleep 60"))
        timeout_s = 1.0  # the Lua's own limit: this and the helper's start-up slack
    conf = _filtered_conf(sandbox, tmp_path, helper, timeout_s)
    name = f"fault-{fault.replace(' ', '-')}"
    began = time.monotonic()
    result = _sbatch(daemon, conf, tmp_path, name, **env)
    assert result.returncode == 0, result.stderr
    assert jobs_named(local_slurm, name) == ["t4"], "unchanged, exactly once"
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    if fault == "opted out":
        assert "advisor" not in result.stderr
    else:
        assert len(warnings) == 1 and warnings[0].endswith("; submitting the job as written"), result.stderr
    if fault == "hang":
        assert time.monotonic() - began < 15, "the helper is cut at the timeout"


@pytest.mark.parametrize("fault", ["no daemon", "crash"])
def test_a_fault_under_test_only_says_slurm_is_asked_and_nothing_is_submitted(
    daemon: Daemon, sandbox: Sandbox, local_slurm: SlurmClient, tmp_path: Path, fault: str
) -> None:
    """sbatch's own dry run: the warning says what sbatch does, the helper's (no daemon) as the Lua's."""
    helper = None if fault == "no daemon" else _fake_helper(tmp_path, "exit 3")
    conf = _filtered_conf(sandbox, tmp_path, helper)
    name = f"test-only-{fault.replace(' ', '-')}"
    result = _sbatch(
        daemon, conf, tmp_path, name, words=("--test-only",), ADVISOR_SOCKET=str(tmp_path / "nobody.sock")
    )
    assert result.returncode == 0 and "to start at" in result.stderr, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "submitting" not in warnings[0], result.stderr
    assert warnings[0].endswith(
        "; asking Slurm about the job as written (sbatch --test-only submits nothing)"
    )
    assert jobs_named(local_slurm, name) == []


def test_options_become_the_command_line_they_came_from() -> None:
    options = {"partition": "t4", "time": "12:00:00", "exclusive": "", "argv": ["job.sh", "x"]}
    assert sbatch_words(options) == ["--partition=t4", "--time=12:00:00", "--exclusive", "job.sh", "x"]
    assert sbatch_words({"partition": "t4", "argv": []}) is None, "a script on stdin"
    assert sbatch_words({"wrap": "hostname", "argv": []}) == ["--wrap=hostname"], "sbatch's own script"


@pytest.mark.parametrize(
    "options",
    [
        None,
        "not json {",
        "[1, 2]",
        '{"argv": ["/nonexistent/job.sh"]}',
        '{"argv": ["JOB"], "bogus-option": "1"}',
        '{"argv": ["JOB"], "test-only": "set"}',
    ],
)
def test_bad_input_to_the_helper_is_one_warning_and_no_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, options: str | None
) -> None:
    """No traceback, ever: a missing options file, garbage, a script gone, an option sbatch never had."""
    from advisor.cli_filter import main

    monkeypatch.setenv("ADVISOR_SOCKET", str(tmp_path / "nobody.sock"))
    job = tmp_path / "job.sh"
    job.write_text(SCRIPT.format(name="bad-input"), encoding="utf-8")
    path = tmp_path / "options.json"
    if options is not None:
        path.write_text(options.replace("JOB", str(job)), encoding="utf-8")
    assert main(["pre", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out == "#end\n", "no change at all"
    assert (
        len(err.strip().splitlines()) == 1 and err.startswith("advisor: warning: ") and "Traceback" not in err
    )
    if options is None or not options.startswith("{"):
        assert err.endswith("; sbatch gets the job as written\n"), "submitted, or under --test-only not"
    elif "test-only" in options:
        assert err.endswith("; asking Slurm about the job as written (sbatch --test-only submits nothing)\n")
    else:
        assert err.endswith("; submitting the job as written\n")


FACTORY = """def build(num_classes=10):
    open({marker!r}, "w").write("the filter ran the user's code")
    import torch

    return torch.nn.Linear(3, num_classes)
"""


@pytest.mark.parametrize("test_only", [True, False])
def test_a_factory_is_never_run_by_the_filter(
    daemon: Daemon, filtered: Path, local_slurm: SlurmClient, tmp_path: Path, test_only: bool
) -> None:
    """An admin's ``sbatch --test-only`` of a user's script runs none of the user's code, nor does sbatch."""
    marker = tmp_path / "factory-ran"
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "mypkg" / "net.py").write_text(FACTORY.format(marker=str(marker)), encoding="utf-8")
    name = f"factory-{test_only}"
    script = tmp_path / f"{name}.sbatch"
    script.write_text(SCRIPT.format(name=name).replace("resnet18", "mypkg.net:build"), encoding="utf-8")
    env = {**daemon.env, "SLURM_CONF": str(filtered)}
    argv = ["sbatch", *(["--test-only"] if test_only else []), str(script)]
    result = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert not marker.exists(), "the factory was imported and called"
    said = " ".join(result.stderr.split())
    # The daemon says why, once: it was sent the script's #ADVISOR lines as written (they name the factory).
    assert said.count("mypkg.net:build is your own code and was not run here") == 1, result.stderr
    assert said.count("advise-submit advises on the model") == 1, result.stderr
    assert "warning" not in result.stderr, "advised from history, not failed"
    assert len(jobs_named(local_slurm, name)) == (0 if test_only else 1)


@pytest.mark.parametrize("written", ["command line", "script"])
def test_a_hetjob_is_never_rewritten_nor_asked_about(
    daemon: Daemon, filtered: Path, local_slurm: SlurmClient, tmp_path: Path, written: str
) -> None:
    """The daemon would move the job to a100 (the first test): a hetjob's components stay as written."""
    name = f"het-{written.replace(' ', '-')}"
    script = tmp_path / f"{name}.sbatch"
    text = SCRIPT.format(name=name)
    if written == "script":
        text = text.replace("#ADVISOR", "#SBATCH hetjob\n#SBATCH --partition=t4 --gres=gpu:1\n#ADVISOR")
    script.write_text(text, encoding="utf-8")
    argv = ["sbatch", *(["--partition=t4", ":", "--partition=t4"] if written == "command line" else [])]
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        (before,) = db.execute("SELECT COUNT(*) FROM audit").fetchone()
    env = {**daemon.env, "SLURM_CONF": str(filtered)}
    result = subprocess.run(
        [*argv, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and result.stdout.startswith("Submitted batch job "), result.stderr
    assert jobs_named(local_slurm, name) == ["t4", "t4"], "one job, both components as written"
    assert result.stderr.count("a heterogeneous job is not advised") == 1, result.stderr
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        (after,) = db.execute("SELECT COUNT(*) FROM audit").fetchone()
    assert after == before, "no component was asked about"


def _fake_sbatch(
    sandbox: Sandbox,
    tmp_path: Path,
    name: str,
    script: Script,
    *argv: str,
    body: str = "sleep 600",
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """Plain sbatch through the real helper, with a fake daemon's answers."""
    conf = _filtered_conf(sandbox, tmp_path)
    job = tmp_path / f"{name}.sbatch"
    job.write_text(SCRIPT.format(name=name).replace("sleep 600", body), encoding="utf-8")
    environment = {"PATH": f"{BIN}:/usr/bin:/bin", "SLURM_CONF": str(conf), **env}
    environment["ADVISOR_SOCKET"] = str(tmp_path / "fake.sock")
    with serving(tmp_path / "fake.sock", script):
        return subprocess.run(
            ["sbatch", *argv, str(job)],
            env=environment,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )


def _rewrite(request_id: str = "ab12", **submission: Any) -> Script:
    """A fake daemon that moves the job to a100 (its own words kept, as the guard requires)."""

    def answer(path: str, request: Any) -> Any:
        if path != "/advise":
            return {"status": "ok"}
        words = request["sbatch_argv"]
        argv = [*words[:-1], "--partition=a100", words[-1]]
        sent = {"argv": argv, "rewritten": True, **submission}
        return {"request_id": request_id, "submission": sent, "recommendation": {"reasons": []}}

    return Script(answer=answer)


def test_an_export_of_none_stays_none(sandbox: Sandbox, local_slurm: SlurmClient, tmp_path: Path) -> None:
    """The advice's variables join the job's own --export=NONE; the user's environment stays out."""
    out = tmp_path / "env.out"
    script = _rewrite(env={"ADVISOR_MICRO_BATCH": "32"})
    result = _fake_sbatch(
        sandbox, tmp_path, "export-none", script, "--export=NONE", body=f"/usr/bin/env > {out}", LEAKED="yes"
    )
    assert result.returncode == 0, result.stderr
    assert jobs_named(local_slurm, "export-none") in (["a100"], [])
    assert "--export=NONE,ADVISOR_MICRO_BATCH=32" in result.stderr, result.stderr
    deadline = time.monotonic() + 90
    while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
        time.sleep(1)
    variables = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert variables.get("ADVISOR_MICRO_BATCH") == "32" and "LEAKED" not in variables


def test_the_daemons_words_reach_the_terminal_clean(
    sandbox: Sandbox, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    hostile = "bad\x1b[2J\x1b]0;owned\x07\nFAKE: job cancelled\r"
    unchanged = {"argv": [], "rewritten": False}
    body = {"request_id": "ab12", "submission": unchanged, "recommendation": {"reasons": [hostile]}}
    result = _fake_sbatch(sandbox, tmp_path, "escapes", Script(body=body))
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr and "\r" not in result.stderr
    assert "bad?[2J" in result.stderr and "\nFAKE" not in result.stderr
    assert jobs_named(local_slurm, "escapes") == ["t4"]


def test_applied_is_said_only_of_what_the_lua_set(
    sandbox: Sandbox, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    """A request id the Lua would not store: the whole answer is refused, and nothing was applied."""
    result = _fake_sbatch(sandbox, tmp_path, "unapplied", _rewrite(request_id="not an id; rm -rf /"))
    assert result.returncode == 0, result.stderr
    assert "applied" not in result.stderr, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and warnings[0].endswith("; submitting the job as written"), result.stderr
    assert jobs_named(local_slurm, "unapplied") == ["t4"]


def test_a_new_batch_size_in_the_script_is_said_in_words_and_the_job_goes_in_as_written(
    sandbox: Sandbox, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    """The advice moves the script to stdin with another batch size (and names the job after its file, as
    advise-submit does): plain sbatch keeps reading the file, so it cannot apply that, and says so."""
    conf = _filtered_conf(sandbox, tmp_path)
    job = tmp_path / "batch-flag.sbatch"
    text = SCRIPT.format(name="batch-flag").replace(
        "--steps=100000", "--steps=100000 --batch-flag=--batch-size"
    )
    job.write_text(text.replace("sleep 600", "echo --batch-size 64"), encoding="utf-8")

    def answer(path: str, request: Any) -> Any:
        words = request.get("sbatch_argv", []) if path == "/advise" else []
        sent = {
            "argv": [*words[:-1], "--partition=a100", "--job-name=batch-flag.sbatch"],
            "stdin": job.read_text().replace("--batch-size 64", "--batch-size 32"),
            "rewritten": True,
        }
        return {"request_id": "ab12", "submission": sent, "recommendation": {"reasons": []}}

    env = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "SLURM_CONF": str(conf),
        "ADVISOR_SOCKET": str(tmp_path / "f.sock"),
    }
    with serving(tmp_path / "f.sock", Script(answer=answer)):
        result = subprocess.run(
            ["sbatch", str(job)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
    assert result.returncode == 0 and result.stdout.startswith("Submitted batch job "), result.stderr
    said = " ".join(result.stderr.split())
    assert "Error" not in said and "job-name" not in said and "applied" not in said, said
    assert "advisor: the advice sets --batch-size in the script, which plain sbatch cannot" in said, said
    assert jobs_named(local_slurm, "batch-flag") == ["t4"], "as written, once"


def test_a_wrap_command_is_advised_and_a_script_on_stdin_is_said_to_be_not(
    daemon: Daemon, filtered: Path, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    env = {**daemon.env, "SLURM_CONF": str(filtered)}
    wrap = "python train.py --model resnet18 --batch-size 64 --epochs 1 --data-path /datasets/cifar10"
    argv = ["sbatch", "--partition=t4", "--gres=gpu:1", "--time=12:00:00", "--output=/dev/null"]
    result = subprocess.run(
        [*argv, "--job-name=filter-wrap", "--wrap", wrap],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and result.stdout.startswith("Submitted batch job "), result.stderr
    assert "advisor: applied: --partition=a100" in result.stderr, result.stderr
    assert jobs_named(local_slurm, "filter-wrap") == ["a100"]
    piped = subprocess.run(
        argv,
        input=SCRIPT.format(name="filter-stdin"),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0, piped.stderr
    said = [line for line in piped.stderr.splitlines() if line.startswith("advisor: ")]
    assert len(said) == 1 and "a script on stdin is not advised here" in said[0], said
    assert jobs_named(local_slurm, "filter-stdin") == ["t4"]
