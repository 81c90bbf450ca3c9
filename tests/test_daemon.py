"""The daemon and `advise-submit` as users meet them: real processes, a real socket, the sandbox's Slurm.

Every test counts the jobs Slurm really received: a job the user asked for is submitted exactly once.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.api import AdviseRequest, Submitted
from advisor.daemon.transport import UnixHTTPConnection
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient

from .daemon_support import BIN, SCRIPT, Daemon, jobs_named, libraries_loaded, started_daemon, submit


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    server = started_daemon(sandbox, tmp_path_factory.mktemp("daemon"))
    yield server
    server.stop()


def test_an_advised_job_is_rewritten_submitted_once_and_explained(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    result = submit(daemon, tmp_path, "--yes", name="advised")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Submitted batch job "), result.stdout
    job_id = int(result.stdout.split()[-1])
    assert jobs_named(local_slurm, "advised") == ["a100"], "moved to the fastest idle partition, once"
    explained = subprocess.run(
        [str(BIN / "advisor"), "explain", str(job_id), "--json"],
        env=daemon.env,
        capture_output=True,
        text=True,
    )
    assert explained.returncode == 0, explained.stderr
    explanation = json.loads(explained.stdout)
    chosen = explanation["recommendation"]["chosen"]
    assert explanation["applied"] and chosen["candidate"]["partition"] == "a100"


def test_a_declined_rewrite_is_audited_as_declined_and_calibrated_as_written(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    result = submit(daemon, tmp_path, "--no-rewrite", name="declined")
    assert result.returncode == 0, result.stderr
    job_id = int(result.stdout.split()[-1])
    assert jobs_named(local_slurm, "declined") == ["t4"]
    explained = subprocess.run(
        [str(BIN / "advisor"), "explain", str(job_id), "--json"],
        env=daemon.env,
        capture_output=True,
        text=True,
    )
    explanation = json.loads(explained.stdout)
    assert explanation["offered"] and not explanation["applied"], "offered a100, submitted to t4"
    assert explanation["recommendation"]["chosen"]["candidate"]["partition"] == "a100"
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        (partition,) = db.execute("SELECT partition FROM advised_jobs WHERE job_id = ?", [job_id]).fetchone()
    assert partition == "t4", "what calibration compares with the real run is the job that went in"
    shown = subprocess.run(
        [str(BIN / "advisor"), "explain", str(job_id)], env=daemon.env, capture_output=True, text=True
    )
    assert (
        f"job {job_id} of " in shown.stdout
        and "submitted as written (the advised changes were" in shown.stdout
    )
    assert "--partition=a100" in shown.stdout, "the advice as the options it adds, not as field names"
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        recorded = db.execute("SELECT model, requests FROM architectures").fetchall()
    assert recorded and all(requests >= 1 for _, requests in recorded), "tonight's plan learns what users run"


def test_parsable_output_and_exit_codes_match_sbatch(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    ours = submit(daemon, tmp_path, "--no-rewrite", "--parsable", name="parsable")
    theirs = subprocess.run(
        ["sbatch", "--parsable", str(tmp_path / "parsable.sbatch")],
        env=daemon.env,
        capture_output=True,
        text=True,
    )
    assert ours.returncode == theirs.returncode == 0
    assert ours.stdout.strip().isdigit() and theirs.stdout.strip().isdigit()
    assert jobs_named(local_slurm, "parsable") == ["t4", "t4"], "--no-rewrite keeps the user's partition"
    rejected = submit(daemon, tmp_path, "--partition=nosuch", name="rejected")
    plain = subprocess.run(
        ["sbatch", "--partition=nosuch", str(tmp_path / "rejected.sbatch")],
        env=daemon.env,
        capture_output=True,
        text=True,
    )
    assert rejected.returncode == plain.returncode != 0
    assert plain.stderr.strip() in rejected.stderr
    assert jobs_named(local_slurm, "rejected") == []


def test_bad_scripts_get_a_clear_error_and_go_to_sbatch_unchanged(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    (tmp_path / "typo.sbatch").write_text(
        SCRIPT.format(name="typo").replace("--global-batch=64", "--global-batch=many"), encoding="utf-8"
    )
    typo = submit(daemon, tmp_path, name="typo")
    assert typo.returncode == 0 and "typo.sbatch:7" in typo.stderr and "submitting unchanged" in typo.stderr
    assert jobs_named(local_slurm, "typo") == ["t4"]

    (tmp_path / "binary.sbatch").write_bytes(b"#!/bin/sh\n\0\xff\xfe")
    binary = submit(daemon, tmp_path, name="binary")
    plain = subprocess.run(
        ["sbatch", str(tmp_path / "binary.sbatch")], env=daemon.env, capture_output=True, text=True
    )
    assert binary.returncode == plain.returncode != 0, (
        "sbatch refuses it; so does the wrapper, with sbatch's words"
    )
    assert plain.stderr.strip() in binary.stderr

    huge = (
        "#!/bin/sh\n#SBATCH --job-name=huge\n#SBATCH --output=/dev/null\n"
        + "# padding\n" * 500_000
        + "true\n"
    )
    (tmp_path / "huge.sbatch").write_text(huge, encoding="utf-8")
    big = submit(daemon, tmp_path, name="huge")
    plain = subprocess.run(
        ["sbatch", str(tmp_path / "huge.sbatch")],
        env=daemon.env,
        capture_output=True,
        text=True,
    )
    assert big.returncode == plain.returncode != 0, "over slurmctld's 4 MiB: refused, by sbatch itself"
    assert big.stderr == plain.stderr, "the daemon is not asked about a script sbatch refuses"
    assert jobs_named(local_slurm, "huge") == []


def test_a_claimed_uid_in_the_body_is_ignored(daemon: Daemon, tmp_path: Path) -> None:
    script = SCRIPT.format(name="claim").encode()
    request = json.loads(
        AdviseRequest.of(script, where="claim.sbatch", sbatch_argv=["claim.sbatch"]).model_dump_json()
    )
    connection = UnixHTTPConnection(daemon.socket, timeout=60)
    connection.request(
        "POST", "/advise", body=json.dumps({**request, "uid": 4242, "user": "mallory"}).encode()
    )
    response = connection.getresponse()
    assert response.status == 200, response.read()
    request_id = json.loads(response.read())["request_id"]
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        uid, user = db.execute("SELECT uid, user FROM audit WHERE request_id = ?", [request_id]).fetchone()
    assert (uid, user) == (os.getuid(), pwd.getpwuid(os.getuid()).pw_name)


def test_a_daemon_killed_mid_request_costs_nothing_and_the_audit_survives_a_restart(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    assert daemon.process is not None
    (tmp_path / "killed.sbatch").write_text(SCRIPT.format(name="killed"), encoding="utf-8")
    daemon.process.send_signal(signal.SIGSTOP)  # it accepts the connection, then never answers
    waiting = subprocess.Popen(
        [str(BIN / "advise-submit"), str(tmp_path / "killed.sbatch")],
        env=daemon.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    daemon.stop(signal.SIGKILL)
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0 and out.startswith("Submitted batch job"), err
    assert "submitting unchanged" in err
    assert jobs_named(local_slurm, "killed") == ["t4"], "exactly once, unchanged"

    slow = submit(daemon, tmp_path, name="absent", ADVISOR_TIMEOUT="2")
    assert slow.returncode == 0 and "did not answer" in slow.stderr
    assert jobs_named(local_slurm, "absent") == ["t4"]

    before = _audit_rows(daemon)
    daemon.start()
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert _audit_rows(daemon) == before > 0


def _audit_rows(daemon: Daemon) -> int:
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        return int(db.execute("SELECT COUNT(*) FROM audit").fetchone()[0])


def test_a_broken_policy_edit_is_reported_and_the_previous_policy_stays(
    daemon: Daemon, tmp_path: Path
) -> None:
    assert daemon.process is not None and daemon.process.poll() is None
    policy = daemon.root / "policy.toml"
    good = policy.read_text(encoding="utf-8")
    try:
        policy.write_text(good + "\n[tuning]\nbatch = 'sometimes'\n", encoding="utf-8")
        daemon.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while "policy error" not in (status := _status(daemon)):
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        assert "policy.toml:" in status
        argv = [str(BIN / "advisor"), "status", "--db", str(daemon.root / "advisor.db"), "--json"]
        shown = json.loads(subprocess.run(argv, env=daemon.env, capture_output=True, text=True).stdout)
        assert shown["daemon"]["policy_error"] and {m["machine"] for m in shown["models"]}
        gpus = {q["partition"]: q["gpus"] for q in shown["queue"]}
        assert gpus == {"a100": 8, "v100": 8, "t4": 4, "cpu": 0}
        advised = submit(daemon, tmp_path, "--dry-run", "--json", name="still")
        assert json.loads(advised.stdout)["advice"]["recommendation"]["mode"] == "rewrite", (
            "the last good one"
        )
    finally:
        policy.write_text(good, encoding="utf-8")
        daemon.process.send_signal(signal.SIGHUP)


def _status(daemon: Daemon) -> str:
    argv = [str(BIN / "advisor"), "status", "--db", str(daemon.root / "advisor.db")]
    return subprocess.run(argv, env=daemon.env, capture_output=True, text=True, timeout=60).stdout


def test_the_daemon_refuses_a_socket_folder_others_can_swap(daemon: Daemon, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    socket = shared / "advisor.sock"
    argv = [str(BIN / "advisor"), "daemon", "--socket", str(socket), "--db", str(tmp_path / "x.db")]
    refused = subprocess.run(argv, env=daemon.env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "without the sticky bit" in refused.stdout + refused.stderr
    assert not socket.exists()


def test_a_repeated_request_is_audited_each_time_and_a_new_policy_answers_at_once(
    daemon: Daemon, tmp_path: Path
) -> None:
    """Identical requests share one answer while its queue waits are fresh, never across a policy change."""
    assert daemon.process is not None
    policy = daemon.root / "policy.toml"
    good = policy.read_text(encoding="utf-8")
    first, second = _asked(daemon, tmp_path, "again"), _asked(daemon, tmp_path, "again")
    assert first["request_id"] != second["request_id"]
    assert first["recommendation"] == second["recommendation"]
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        ids = {row[0] for row in db.execute("SELECT request_id FROM audit WHERE \"where\" LIKE '%again%'")}
    assert {first["request_id"], second["request_id"]} <= ids
    try:
        policy.write_text(good.replace('mode = "rewrite"', 'mode = "advise"'), encoding="utf-8")
        daemon.process.send_signal(signal.SIGHUP)
        # Sooner than the cached answer would expire (10 s after the first request).
        deadline = time.monotonic() + 8
        while True:
            third = json.loads(submit(daemon, tmp_path, "--dry-run", "--json", name="again").stdout)["advice"]
            if third["recommendation"]["mode"] == "advise":
                break
            assert time.monotonic() < deadline, "the answer cached under the previous policy was served"
            time.sleep(0.2)
        assert not third["recommendation"]["apply"]
    finally:
        policy.write_text(good, encoding="utf-8")
        daemon.process.send_signal(signal.SIGHUP)


def test_a_user_whose_mode_is_off_is_submitted_unchanged_and_never_audited(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    assert daemon.process is not None and daemon.process.poll() is None
    policy = daemon.root / "policy.toml"
    good = policy.read_text(encoding="utf-8")
    me = pwd.getpwuid(os.getuid()).pw_name
    try:
        policy.write_text(good + f'\n[users.{me}]\nmode = "off"\n', encoding="utf-8")
        daemon.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while (
            json.loads(submit(daemon, tmp_path, "--dry-run", "--json", name="probe").stdout)["advice"][
                "recommendation"
            ]["mode"]
            != "off"
        ):
            assert time.monotonic() < deadline, "the policy was never reloaded"
            time.sleep(0.2)
        before = _audit_rows(daemon)
        result = submit(daemon, tmp_path, "--yes", name="private")
        assert result.returncode == 0 and result.stdout.startswith("Submitted batch job"), result.stderr
        assert "did not record" not in result.stderr, "nothing to link: the wrapper does not ask"
        assert jobs_named(local_slurm, "private") == ["t4"], "unchanged"
        assert _audit_rows(daemon) == before, "nothing of the submission is kept"
    finally:
        policy.write_text(good, encoding="utf-8")
        daemon.process.send_signal(signal.SIGHUP)


def _post(daemon: Daemon, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    connection = UnixHTTPConnection(daemon.socket, timeout=60)
    try:
        connection.request("POST", path, body=body)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _asked(daemon: Daemon, tmp_path: Path, name: str) -> dict[str, Any]:
    """The daemon's answer to a submission's request (audited: a dry run's preview is not)."""
    script = SCRIPT.format(name=name).encode()
    where = str(tmp_path / f"{name}.sbatch")
    request = AdviseRequest.of(script, where=where, sbatch_argv=[where])
    status, answer = _post(daemon, "/advise", request.model_dump_json().encode())
    assert status == 200, answer
    return answer


def test_a_factory_without_its_table_is_advised_from_history_with_one_line_saying_why(
    daemon: Daemon, tmp_path: Path
) -> None:
    """What plain sbatch sends through the cli_filter, which runs no user code: the script as written, with
    its factory named, and no layer table (a 422 before, and the job went in unadvised)."""
    script = SCRIPT.format(name="untabled").replace("resnet18", "mypkg.net:build").encode()
    request = AdviseRequest.of(
        script, where=str(tmp_path / "untabled.sbatch"), sbatch_argv=["untabled.sbatch"]
    )
    status, answer = _post(daemon, "/advise", request.model_dump_json().encode())
    assert status == 200, answer
    reasons = answer["recommendation"]["reasons"]
    assert reasons[0] == (
        "mypkg.net:build is your own code and was not run here: advice from the job's history only "
        "(advise-submit advises on the model)"
    ), reasons
    assert not any("mypkg.net:build" in reason for reason in reasons[1:]), "said once"
    assert answer["recommendation"]["candidates"] == [], "no model advice"


def _held_job(daemon: Daemon, tmp_path: Path, name: str, comment: str, *as_user: str) -> int:
    """A held job (it never runs) with ``comment``, submitted by ``as_user`` (``--uid``: root submits as
    them), else by this process's user."""
    script = tmp_path / f"{name}.sbatch"
    script.write_text("#!/bin/sh\nsleep 600\n", encoding="utf-8")
    argv = ["sbatch", "--parsable", "--hold", f"--job-name={name}", "--output=/dev/null", "--partition=t4"]
    argv += [*as_user, f"--comment={comment}", str(script)]
    result = subprocess.run(argv, env=daemon.env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return int(result.stdout.strip().split(";")[0])


def _explain(daemon: Daemon, job_id: int) -> subprocess.CompletedProcess[str]:
    argv = [str(BIN / "advisor"), "explain", str(job_id), "--json"]
    return subprocess.run(argv, env=daemon.env, capture_output=True, text=True, timeout=60)


def test_a_job_is_linked_to_advice_by_its_real_owner_whatever_its_comment_says(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    """``scontrol show -o job`` prints a job's comment after its owner: a ``UserId=`` in it once posed as the
    owner, so a caller could link another user's job to their own advice (and explain it, and set its
    prediction in the queue replay), and an owner whose comment named someone else could not link theirs."""
    me = os.getuid()
    advice = _asked(daemon, tmp_path, "linking")
    theirs = _held_job(daemon, tmp_path, "theirs", f"x UserId={me}({me})", "--uid=65534", "--gid=65534")
    assert local_slurm.job_owner(theirs) == 65534
    link = Submitted(request_id=advice["request_id"], job_id=theirs, applied=False)
    status, answer = _post(daemon, "/submitted", link.model_dump_json().encode())
    assert status == 403 and f"job {theirs} does not belong to uid {me}" in str(answer["error"]), answer
    refused = _explain(daemon, theirs)
    assert (
        refused.returncode != 0
        and f"no advice of yours was given for job {theirs}" in refused.stdout + refused.stderr
    )

    mine = _held_job(daemon, tmp_path, "mine", "y UserId=65534(65534)")
    link = Submitted(request_id=advice["request_id"], job_id=mine, applied=False)
    status, answer = _post(daemon, "/submitted", link.model_dump_json().encode())
    assert status == 200, answer
    explained = _explain(daemon, mine)
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["request_id"] == advice["request_id"]


def test_the_model_libraries_load_at_the_start_not_with_the_first_hf_or_timm_request(daemon: Daemon) -> None:
    """The daemon builds ``hf:``/``timm:`` tables itself (library code); transformers and timm load in the
    background once it starts, so the first such request does not wait seconds for them."""
    assert "model libraries loaded: transformers, timm (" in libraries_loaded(daemon)


def test_without_the_model_extras_nothing_is_loaded_and_nothing_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from advisor.introspect.builders import load_libraries

    monkeypatch.setitem(sys.modules, "transformers", None)
    monkeypatch.setitem(sys.modules, "timm", None)
    assert load_libraries() == []
