"""The cluster-wide service: the daemon on TCP, callers identified by MUNGE (the sandbox's own munged).

A "second login host" is a client that reaches the service from another loopback address with no socket of
the daemon's at hand; what identifies it is the credential munged made for it, never the request.
"""

from __future__ import annotations

import http.client
import json
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.api import AdviseRequest
from advisor.daemon import munge
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient

from .daemon_support import (
    BIN,
    SCRIPT,
    Daemon,
    jobs_named,
    munged_open_to_everyone,
    serving_the_cluster,
)
from .fake_daemon import Script, serving_tcp


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    server = serving_the_cluster(sandbox, tmp_path_factory.mktemp("service"))
    yield server
    server.stop()


def login_host_env(daemon: Daemon) -> dict[str, str]:
    """advise-submit on another host: the service's address and munged, no daemon socket."""
    env = {key: value for key, value in daemon.env.items() if key != "ADVISOR_SOCKET"}
    env["ADVISOR_SOCKET"] = "/nonexistent/advisor.sock"
    env["ADVISOR_SERVICE"] = f"127.0.0.1:{daemon.env['SERVICE_PORT']}"
    return env


def credential(daemon: Daemon, payload: str, *words: str) -> str:
    argv = ["munge", f"--socket={daemon.env['ADVISOR_MUNGE_SOCKET']}", *words, "--string", payload]
    made = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def post(daemon: Daemon, body: bytes, token: str | None) -> tuple[int, dict[str, object]]:
    """POST /advise from the second loopback address, with ``token`` as the request's credential."""
    connection = http.client.HTTPConnection(
        "127.0.0.1", int(daemon.env["SERVICE_PORT"]), timeout=60, source_address=("127.0.0.2", 0)
    )
    headers = {"Content-Type": "application/json"} | ({munge.HEADER: token} if token is not None else {})
    try:
        connection.request("POST", "/advise", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def request_body(name: str) -> bytes:
    script = SCRIPT.format(name=name).encode()
    request = json.loads(
        AdviseRequest.of(script, where=f"{name}.sbatch", sbatch_argv=[f"{name}.sbatch"]).model_dump_json()
    )
    return json.dumps({**request, "uid": 0, "user": "root"}).encode()  # claims that must be ignored


def audited_uid(daemon: Daemon, request_id: str) -> int:
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        (uid,) = db.execute("SELECT uid FROM audit WHERE request_id = ?", [request_id]).fetchone()
    return int(uid)


def test_a_login_host_submits_through_the_service_and_is_advised_as_itself(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    script = tmp_path / "central.sbatch"
    script.write_text(SCRIPT.format(name="central"), encoding="utf-8")
    result = subprocess.run(
        [str(BIN / "advise-submit"), "--yes", "--json", str(script)],
        env=login_host_env(daemon),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["advice"] is not None, "advised over TCP, not submitted unchanged"
    assert jobs_named(local_slurm, "central") == ["a100"], (
        "rewritten, submitted once, by the user's own sbatch"
    )
    assert audited_uid(daemon, report["advice"]["request_id"]) == 0


@pytest.fixture
def reachable_by_everyone(daemon: Daemon) -> Iterator[None]:
    with munged_open_to_everyone(Path(daemon.env["ADVISOR_MUNGE_SOCKET"])):
        yield


@pytest.mark.usefixtures("reachable_by_everyone")
def test_the_caller_is_whoever_munge_says_and_never_what_the_body_claims(daemon: Daemon) -> None:
    body = request_body("nobody")
    digest = munge.request_digest("POST", "/advise", body)
    status, answer = post(daemon, body, credential(daemon, digest, "--uid=65534", "--gid=65534"))
    assert status == 200, answer
    assert audited_uid(daemon, str(answer["request_id"])) == 65534


def test_missing_forged_mismatched_replayed_and_expired_credentials_are_refused(daemon: Daemon) -> None:
    body = request_body("refused")
    digest = munge.request_digest("POST", "/advise", body)
    assert post(daemon, body, None)[0] == 401
    good = credential(daemon, digest)
    forged = good[:40] + ("A" if good[40] != "A" else "B") + good[41:]
    status, answer = post(daemon, body, forged)
    assert status == 401 and "MUNGE credential refused" in str(answer["error"])
    other = credential(daemon, munge.request_digest("POST", "/advise", body + b" "))
    status, answer = post(daemon, body, other)
    assert status == 401 and "made for another request" in str(answer["error"])
    assert post(daemon, body, good)[0] == 200
    status, answer = post(daemon, body, good)
    assert status == 401 and "replayed" in str(answer["error"]).lower()
    brief = credential(daemon, digest, "--ttl=1")
    time.sleep(2.5)
    status, answer = post(daemon, body, brief)
    assert status == 401 and "expired" in str(answer["error"]).lower()


def test_an_answer_no_trusted_user_signed_is_no_advice(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    """Something else on the service's address (its port taken while the daemon was down) may not
    rewrite jobs: its answer carries no credential of root's or the advisor's user."""
    script = tmp_path / "impostor.sbatch"
    script.write_text(SCRIPT.format(name="impostor"), encoding="utf-8")
    body = {"request_id": "r1", "submission": {"argv": ["--partition=a100", str(script)], "rewritten": True}}
    with serving_tcp(Script(body={**body, "recommendation": {}})) as port:
        env = {**login_host_env(daemon), "ADVISOR_SERVICE": f"127.0.0.1:{port}"}
        result = subprocess.run(
            [str(BIN / "advise-submit"), str(script)], env=env, capture_output=True, text=True, timeout=120
        )
    assert result.returncode == 0, result.stderr
    assert "carries no valid MUNGE credential" in result.stderr and "submitting unchanged" in result.stderr
    assert jobs_named(local_slurm, "impostor") == ["t4"]
