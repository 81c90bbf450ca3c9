"""`advise-submit` against a daemon that lies, stalls or is someone else: the real sbatch of the sandbox
counts the jobs, and every call leaves exactly one, unchanged wherever the advice was refused."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor import __version__
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient

from .factories.shared_folder import package, plant
from .fake_daemon import Script, serving

BIN = Path(sys.executable).parent
SCRIPT = """#!/bin/sh
#SBATCH --partition=t4
#SBATCH --gres=gpu:1
#SBATCH --time=10:00
#SBATCH --job-name={name}
#SBATCH --output=/dev/null
#ADVISOR --model=resnet18 --global-batch=64 --steps=100 --batch-flag=--batch-size
python train.py --batch-size 64
"""


@pytest.fixture
def env(sandbox: Sandbox, tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "SLURM_CONF": sandbox.client_env()["SLURM_CONF"],
        "ADVISOR_SOCKET": str(tmp_path / "advisor.sock"),
        "ADVISOR_TIMEOUT": "5",
    }


def submit(tmp_path: Path, env: dict[str, str], name: str, *words: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / f"{name}.sbatch"
    script.write_text(SCRIPT.format(name=name), encoding="utf-8")
    argv = [str(BIN / "advise-submit"), *words, str(script)]
    return subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def jobs_named(slurm: SlurmClient, name: str) -> list[str]:
    return [job.partition for job in slurm.jobs() if job.name == name]


def answer(tmp_path: Path, name: str, **submission: Any) -> dict[str, Any]:
    sent = {"argv": ["--partition=a100", str(tmp_path / f"{name}.sbatch")], "rewritten": True, **submission}
    return {"request_id": "r1", "submission": sent, "recommendation": {}}


def test_a_rewrite_within_the_rules_is_applied(
    env: dict[str, str], local_slurm: SlurmClient, tmp_path: Path
) -> None:
    """The control: the fake daemon's answers do reach sbatch, so each refusal below is the guard's."""
    with serving(tmp_path / "advisor.sock", Script(body=answer(tmp_path, "fair"))):
        result = submit(tmp_path, env, "fair")
    assert result.returncode == 0, result.stderr
    assert jobs_named(local_slurm, "fair") == ["a100"]


def test_a_rewrite_slurm_refuses_goes_in_as_written_once_and_the_daemon_hears_so(
    env: dict[str, str], local_slurm: SlurmClient, tmp_path: Path
) -> None:
    """A partition gone between the advice and sbatch: the job still goes in, as the user wrote it."""
    body = answer(tmp_path, "refused", argv=["--partition=gone", str(tmp_path / "refused.sbatch")])
    with serving(tmp_path / "advisor.sock", Script(body=body)) as script:
        result = submit(tmp_path, env, "refused")
    assert result.returncode == 0, result.stderr
    assert "sbatch refused the advised job (sbatch: error: " in result.stderr
    assert "invalid partition" in result.stderr.lower() and "submitting it as written" in result.stderr
    assert result.stdout.startswith("Submitted batch job "), "the job as written, once"
    assert jobs_named(local_slurm, "refused") == ["t4"]
    job_id = int(result.stdout.split()[-1])
    assert script.requests[-1] == ("/submitted", {"request_id": "r1", "job_id": job_id, "applied": False})


def test_a_job_slurm_refuses_as_written_too_is_tried_once_more_and_fails_as_sbatch_fails(
    env: dict[str, str], local_slurm: SlurmClient, tmp_path: Path
) -> None:
    (tmp_path / "nowhere.sbatch").write_text(
        SCRIPT.format(name="nowhere").replace("--partition=t4", "--partition=nosuch"), encoding="utf-8"
    )
    body = answer(tmp_path, "nowhere", argv=["--partition=gone", str(tmp_path / "nowhere.sbatch")])
    argv = [str(BIN / "advise-submit"), "--json", str(tmp_path / "nowhere.sbatch")]
    with serving(tmp_path / "advisor.sock", Script(body=body)) as script:
        result = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    report = json.loads(result.stdout)
    assert result.returncode == report["sbatch"]["returncode"] != 0
    assert report["refused"]["argv"][0] == "--partition=gone"
    assert "nosuch" not in report["refused"]["stderr"] and report["sbatch"]["argv"][0].endswith(
        "nowhere.sbatch"
    )
    assert [path for path, _ in script.requests] == ["/advise"], "no job, nothing to report"
    assert jobs_named(local_slurm, "nowhere") == []


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"env": {"LD_PRELOAD": "/tmp/evil.so"}}, "LD_PRELOAD"),
        ({"env": {"SLURM_CONF": "/nonexistent/slurm.conf"}}, "SLURM_CONF"),
        ({"argv": ["--export=ALL,LD_PRELOAD=/tmp/evil.so", "JOB"]}, "--export"),
        ({"argv": ["--uid=0", "--gid=0", "JOB"]}, "--uid"),
        ({"argv": ["--wrap=id", "JOB"]}, "--wrap"),
        ({"argv": ["--array=0-9", "JOB"]}, "--array"),
        ({"argv": ["--partition=a100; rm -rf /", "JOB"]}, "partition names"),
        ({"argv": [], "stdin": "#!/bin/sh\n#SBATCH -p cpu\nid\n"}, "not the job's own"),
    ],
)
def test_an_answer_beyond_a_rewrite_is_refused_and_the_job_goes_in_unchanged_once(
    env: dict[str, str],
    local_slurm: SlurmClient,
    tmp_path: Path,
    change: dict[str, Any],
    reason: str,
) -> None:
    name = "evil" + hashlib.sha256(reason.encode()).hexdigest()[:8]
    job = str(tmp_path / f"{name}.sbatch")
    if "argv" in change:
        change = {**change, "argv": [job if word == "JOB" else word for word in change["argv"]]}
    with serving(tmp_path / "advisor.sock", Script(body=answer(tmp_path, name, **change))):
        result = submit(tmp_path, env, name)
    assert result.returncode == 0, result.stderr
    assert "advice was refused" in result.stderr and reason in result.stderr
    assert jobs_named(local_slurm, name) == ["t4"], "exactly one job, as the user wrote it"


def test_a_socket_served_by_another_user_is_not_asked(
    env: dict[str, str], local_slurm: SlurmClient, tmp_path: Path
) -> None:
    folder = Path(tempfile.mkdtemp(prefix="advisor-peer-"))
    try:
        folder.chmod(0o777)
        sock, body = folder / "advisor.sock", folder / "answer.json"
        body.write_text(
            json.dumps(answer(tmp_path, "stranger", env={"LD_PRELOAD": "/x.so"})),
            encoding="utf-8",
        )
        body.chmod(0o644)
        # Debian's own Python and a copy of the helper: nobody may not read this checkout or its venv.
        helper = folder / "fake_daemon.py"
        shutil.copy(Path(__file__).with_name("fake_daemon.py"), helper)
        helper.chmod(0o644)
        server = subprocess.Popen(["/usr/bin/python3", str(helper), str(sock), str(body)], user="nobody")
        try:
            deadline = time.monotonic() + 30
            while not sock.exists():
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            result = submit(tmp_path, {**env, "ADVISOR_SOCKET": str(sock)}, "stranger")
        finally:
            server.terminate()
            server.wait()
    finally:
        shutil.rmtree(folder)
    assert result.returncode == 0, result.stderr
    assert "not by the advisor's user" in result.stderr
    assert jobs_named(local_slurm, "stranger") == ["t4"]


def test_a_trickling_daemon_costs_at_most_the_timeout(
    env: dict[str, str], local_slurm: SlurmClient, tmp_path: Path
) -> None:
    script = Script(body=answer(tmp_path, "trickle"), trickle_s=0.2)
    with serving(tmp_path / "advisor.sock", script):
        began = time.monotonic()
        result = submit(tmp_path, {**env, "ADVISOR_TIMEOUT": "2"}, "trickle")
        took = time.monotonic() - began
    assert result.returncode == 0 and "did not answer" in result.stderr
    assert took < 10, f"the whole call is bounded by ADVISOR_TIMEOUT, not each read: {took:.1f} s"
    assert jobs_named(local_slurm, "trickle") == ["t4"]


def test_the_daemons_error_text_reaches_the_terminal_as_one_clean_line(
    env: dict[str, str], local_slurm: SlurmClient, tmp_path: Path
) -> None:
    script = Script(status=422, body={"error": "bad\x1b[2J\x1b]0;owned\x07\nFAKE: job cancelled"})
    with serving(tmp_path / "advisor.sock", script):
        result = submit(tmp_path, {**env, "ADVISOR_TIMEOUT": ""}, "escape")
    assert result.returncode == 0
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "bad?[2J" in result.stderr and "\nFAKE" not in result.stderr
    assert jobs_named(local_slurm, "escape") == ["t4"]


def test_an_answer_this_version_cannot_show_is_no_advice(
    env: dict[str, str], local_slurm: SlurmClient, tmp_path: Path
) -> None:
    """A daemon upgraded before the wrapper (or after): its table cannot be shown, so nothing is applied."""
    with serving(tmp_path / "advisor.sock", Script(body=answer(tmp_path, "skew"))):
        result = submit(tmp_path, env, "skew", "--explain")
    assert result.returncode == 0
    assert "submitting unchanged" in result.stderr and "Traceback" not in result.stderr
    assert jobs_named(local_slurm, "skew") == ["t4"]


@pytest.mark.parametrize("factory", ["sys:exit", "os:abort"])
def test_a_factory_that_exits_or_aborts_costs_only_the_advice(
    env: dict[str, str], local_slurm: SlurmClient, tmp_path: Path, factory: str
) -> None:
    name = f"factory{factory.replace(':', '')}"
    words = [f"--model={factory}"]
    result = submit(tmp_path, {**env, "ADVISOR_SOCKET": str(tmp_path / "none.sock")}, name, *words)
    assert result.returncode == 0, result.stderr
    assert "could not be introspected" in result.stderr
    assert "Traceback" not in result.stderr
    assert jobs_named(local_slurm, name) == ["t4"]
    dry = submit(tmp_path, env, name, "--dry-run", *words)
    assert dry.returncode == 0 and "to start at" in dry.stderr
    assert jobs_named(local_slurm, name) == ["t4"], "a dry run submits nothing"


@pytest.fixture
def terminal() -> Iterator[tuple[int, int]]:
    main, side = pty.openpty()
    yield main, side
    for fd in (main, side):
        os.close(fd)


def _read_until(fd: int, text: str, timeout: float = 60) -> str:
    seen, deadline = b"", time.monotonic() + timeout
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        assert left > 0, seen.decode(errors="replace")
        if select.select([fd], [], [], left)[0]:
            seen += os.read(fd, 4096)
    return seen.decode(errors="replace")


def test_ctrl_c_while_the_daemon_thinks_submits_nothing_and_prints_no_traceback(
    env: dict[str, str], local_slurm: SlurmClient, tmp_path: Path
) -> None:
    script = Script(body=answer(tmp_path, "interrupted"), trickle_s=1.0)
    with serving(tmp_path / "advisor.sock", script):
        job = tmp_path / "interrupted.sbatch"
        job.write_text(SCRIPT.format(name="interrupted"), encoding="utf-8")
        wrapper = subprocess.Popen(
            [str(BIN / "advise-submit"), str(job)],
            env={**env, "ADVISOR_TIMEOUT": "30"},
            stderr=subprocess.PIPE,
            text=True,
            # A suite started in the background (`cmd &`) has SIGINT ignored, and children inherit that.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 30
        while not script.requests:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        wrapper.send_signal(signal.SIGINT)
        _, stderr = wrapper.communicate(timeout=30)
    assert wrapper.returncode == 130
    assert "interrupted; nothing was submitted" in stderr and "Traceback" not in stderr
    assert jobs_named(local_slurm, "interrupted") == []


def test_end_of_input_at_the_prompt_means_no(
    env: dict[str, str], local_slurm: SlurmClient, tmp_path: Path, terminal: tuple[int, int]
) -> None:
    """On a terminal the wrapper asks before applying; Ctrl-D is a no, and the job goes in unchanged."""
    main, side = terminal
    job = tmp_path / "eof.sbatch"
    job.write_text(SCRIPT.format(name="eof"), encoding="utf-8")
    body = answer(tmp_path, "eof")
    with serving(tmp_path / "advisor.sock", Script(body=body)):
        wrapper = subprocess.Popen(
            [str(BIN / "advise-submit"), "--json", str(job)], env=env, stdin=side, stderr=side
        )
        _read_until(main, "[Y/n]")
        os.write(main, b"\x04")
        assert wrapper.wait(timeout=60) == 0
    assert jobs_named(local_slurm, "eof") == ["t4"]


def test_help_lists_the_wrappers_own_options_without_any_slurm(tmp_path: Path) -> None:
    for words in (["--help"], ["--dry-run", "-h", "job.sh"]):
        shown = subprocess.run(
            [str(BIN / "advise-submit"), *words],
            env={"PATH": str(tmp_path)},  # no sbatch, no SLURM_CONF
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0 and shown.stderr == ""
        assert (
            "--dry-run" in shown.stdout
            and "--batch-flag" in shown.stdout
            and "ADVISOR_TIMEOUT" in shown.stdout
        )
        assert shown.stdout.rstrip().endswith("see `sbatch --help`.")


def test_version_is_the_advisors_without_any_slurm(tmp_path: Path) -> None:
    for words in (["--version"], ["-V"], ["--dry-run", "--version", "job.sh"], ["--version", "--bogus"]):
        shown = subprocess.run(
            [str(BIN / "advise-submit"), *words],
            env={"PATH": str(tmp_path)},  # no sbatch: sbatch --version would fail here
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (shown.returncode, shown.stdout, shown.stderr) == (
            0,
            f"advise-submit (advisor) {__version__}\n",
            "",
        )


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_line_that_cannot_be_read_says_what_happens_to_the_job(tmp_path: Path, dry_run: bool) -> None:
    """sbatch says what is wrong with the line (here: no sbatch at all); the wrapper says what it does."""
    words = ["--dry-run"] * dry_run + ["--no-such-option", "job.sh"]
    shown = subprocess.run(
        [str(BIN / "advise-submit"), *words], env={"PATH": str(tmp_path)}, capture_output=True, text=True
    )
    said = shown.stderr.splitlines()[0]
    assert said.startswith("advise-submit: not advised: ") and "--no-such-option" in said, shown.stderr
    written = "asking Slurm about the job as written (sbatch --test-only; a dry run submits nothing)"
    assert said.endswith(written if dry_run else "; submitting it as written"), said
    assert "cannot run sbatch" in shown.stderr and shown.returncode == 127


def test_a_hetjob_is_never_rewritten(env: dict[str, str], local_slurm: SlurmClient, tmp_path: Path) -> None:
    """A daemon that moves a command-line hetjob's last component: refused, both components as written."""

    def moved(path: str, request: Any) -> Any:
        words = request["sbatch_argv"] if path == "/advise" else ["x"]
        sent = {"argv": [*words[:-1], "--partition=a100", words[-1]], "rewritten": True}
        return {"request_id": "r1", "submission": sent, "recommendation": {}}

    with serving(tmp_path / "advisor.sock", Script(answer=moved)):
        result = submit(tmp_path, env, "hetjob", "--partition=t4", ":", "--partition=t4")
    assert result.returncode == 0, result.stderr
    assert "advice was refused" in result.stderr and "hetjob is never rewritten" in result.stderr
    assert jobs_named(local_slurm, "hetjob") == ["t4", "t4"]


def test_a_factory_child_runs_nothing_planted_where_the_job_is_submitted(
    env: dict[str, str], local_slurm: SlurmClient, tmp_path: Path
) -> None:
    """A shared folder with a json.py (and torch.py, pathlib.py) that would run as whoever submits from it;
    the user's own package there is still found, and its table sent."""
    marker = plant(tmp_path)
    package(tmp_path)
    unchanged = {"request_id": "r1", "submission": {"argv": [], "rewritten": False}, "recommendation": {}}
    with serving(tmp_path / "advisor.sock", Script(body=unchanged)) as script:
        result = submit(tmp_path, env, "planted", "--model=mypkg.net:build", "--input-shape=3x32x32")
    assert result.returncode == 0, result.stderr
    assert not marker.exists(), marker.read_text()
    assert script.requests and script.requests[0][1]["table"] is not None, result.stderr
    assert jobs_named(local_slurm, "planted") == ["t4"]
