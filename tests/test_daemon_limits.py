"""The daemon against a hostile local user, byte by byte on its socket: every malformed request gets a 4xx
that names the problem, no caller can hold the daemon, and nothing a caller does logs a traceback."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.api import AdviseRequest
from advisor.daemon.transport import BUDGET_HEADER
from advisor.jobscript.advisor_words import OPTIONS
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient

from .daemon_support import BIN, SCRIPT, Daemon, jobs_named, started_daemon

PER_USER = 5
DEADLINE_S = 3


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    limits = ["--max-connections-per-user", str(PER_USER), "--connection-deadline", str(DEADLINE_S)]
    server = started_daemon(sandbox, tmp_path_factory.mktemp("strict"), *limits, "--workers", "2")
    yield server
    server.stop()
    assert "Traceback" not in (server.root / "daemon.log").read_text(), "no caller makes the daemon log one"


def exchange(daemon: Daemon, data: bytes, timeout: float = 30) -> bytes:
    """Send raw bytes, read until the daemon closes the connection."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(timeout)
        connection.connect(str(daemon.socket))
        connection.sendall(data)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return answer


def http(method: str, path: bytes, body: bytes | None = None, **headers: str) -> bytes:
    lines = [method.encode() + b" " + path + b" HTTP/1.1", b"Host: advisor", b"Connection: close"]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}".encode())
    lines += [f"{name.replace('_', '-')}: {value}".encode() for name, value in headers.items()]
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def advise_body(name: str, description_args: list[str] | None = None, account: str | None = None) -> bytes:
    script = SCRIPT.format(name=name).encode()
    request = AdviseRequest.of(
        script,
        where=f"{name}.sbatch",
        sbatch_argv=[*([f"--account={account}"] if account else []), f"{name}.sbatch"],
        description_args=description_args or [],
    )
    return request.model_dump_json().encode()


BAD_BASE64 = json.dumps({"script_b64": "!!not base64!!", "where": "x", "sbatch_argv": []}).encode()


@pytest.mark.parametrize(
    ("request_bytes", "expected", "says"),
    [
        (b"POST /advise HTTP/1.1\r\nHost: advisor\r\nContent-Length: -1\r\n\r\n", 400, b"Content-Length"),
        (b"POST /advise HTTP/1.1\r\nHost: advisor\r\nContent-Length: abc\r\n\r\n", 400, b"Content-Length"),
        (b"POST /advise HTTP/1.1\r\nHost: advisor\r\nConnection: close\r\n\r\n", 411, b"Content-Length"),
        (
            b"POST /advise HTTP/1.1\r\nHost: advisor\r\nContent-Length: 20000000\r\n\r\n",
            413,
            b"over",
        ),
        (http("POST", b"/advise", BAD_BASE64), 400, b"script_b64: Value error, not base64"),
        (http("POST", b"/advise", b"{"), 400, b"malformed request"),
        (http("GET", b"/explain/99999999999999999999999"), 404, b"no such endpoint"),
        (http("GET", b"/explain/4294967296"), 404, b"no advice of yours"),
        (http("GET", b"/explain/9999999999"), 404, b"no advice of yours"),
        (http("GET", b"/explain/9999999999999999999"), 404, b"no such endpoint"),
        (http("GET", "/explain/²".encode()), 400, b"Invalid char in url path"),
        (http("POST", b"/submitted", b'{"request_id": "r", "job_id": -5}'), 400, b"job_id"),
        (
            http("POST", b"/advise", advise_body("huge", ["--global-batch=" + "9" * 30])),
            422,
            b"--global-batch",
        ),
        (http("POST", b"/advise", advise_body("inf", ["--epochs=inf", "--steps="])), 422, b"--"),
        (http("POST", b"/advise", advise_body("x"), **{BUDGET_HEADER: "soon"}), 400, BUDGET_HEADER.encode()),
    ],
)
def test_a_malformed_request_gets_a_4xx_that_names_the_problem(
    daemon: Daemon, request_bytes: bytes, expected: int, says: bytes
) -> None:
    answer = exchange(daemon, request_bytes)
    assert status(answer) == expected, answer[:500]
    assert says in answer


def test_a_caller_over_its_connection_cap_is_closed_and_others_are_still_served(daemon: Daemon) -> None:
    held = []
    for _ in range(PER_USER + 3):
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(str(daemon.socket))
        held.append(connection)
    time.sleep(0.5)
    closed = 0
    for connection in held:
        connection.settimeout(0.2)
        with contextlib.suppress(TimeoutError):  # still open: nothing to read
            closed += connection.recv(1) == b""
    assert closed == 3, "exactly the connections over the cap"
    for connection in held:
        connection.close()
    time.sleep(0.2)
    assert status(exchange(daemon, http("GET", b"/health"))) == 200


def test_a_request_never_finished_is_closed_at_the_deadline(daemon: Daemon) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(DEADLINE_S + 10)
        connection.connect(str(daemon.socket))
        began = time.monotonic()
        connection.sendall(
            b"POST /advise HTTP/1.1\r\nHost: advisor\r\nContent-Length: 100\r\n\r\n{"
        )  # and then a trickle
        assert connection.recv(1) == b""
        assert DEADLINE_S - 0.5 < time.monotonic() - began < DEADLINE_S + 5


def test_an_early_disconnect_costs_nothing(daemon: Daemon) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(str(daemon.socket))
        connection.sendall(http("POST", b"/advise", advise_body("gone")))
    time.sleep(3)  # the answer is computed and finds no one to take it
    assert status(exchange(daemon, http("GET", b"/health"))) == 200


def test_past_the_callers_budget_it_says_so_at_once_and_keeps_the_answer_for_the_retry(
    daemon: Daemon,
) -> None:
    body = advise_body("budget")
    began = time.monotonic()
    hurried = exchange(daemon, http("POST", b"/advise", body, **{BUDGET_HEADER: "1"}))
    assert status(hurried) == 503 and b"no answer within" in hurried
    assert time.monotonic() - began < 1
    time.sleep(5)
    began = time.monotonic()
    assert status(exchange(daemon, http("POST", b"/advise", body))) == 200
    assert time.monotonic() - began < 2, "the work went on and the retry finds it ready"


def _will_run_rpcs(sandbox: Sandbox) -> int:
    out = subprocess.run(["sdiag"], env=sandbox.client_env(), capture_output=True, text=True, check=True)
    found = re.search(r"REQUEST_JOB_WILL_RUN\s+\(\s*\d+\)\s+count:(\d+)", out.stdout)
    return int(found[1]) if found else 0


def test_identical_concurrent_requests_share_one_set_of_slurm_queries(
    daemon: Daemon, sandbox: Sandbox
) -> None:
    """Slurm's estimates are shared per resources and account: two accounts nobody asked for yet make two
    cold caches of the same candidates, one for a request alone and one for a burst."""
    stamp = time.time_ns()
    before = _will_run_rpcs(sandbox)
    single = exchange(daemon, http("POST", b"/advise", advise_body("alone", account=f"alone{stamp}")))
    one_set = _will_run_rpcs(sandbox) - before
    assert status(single) == 200 and one_set > 0
    body = http("POST", b"/advise", advise_body("burst", account=f"burst{stamp}"))
    answers: list[int] = []
    before = _will_run_rpcs(sandbox)
    threads = [
        threading.Thread(target=lambda: answers.append(status(exchange(daemon, body))))
        for _ in range(PER_USER)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spent = _will_run_rpcs(sandbox) - before
    assert answers == [200] * PER_USER
    assert spent == one_set, f"{PER_USER} identical requests cost {spent} --test-only, one alone {one_set}"


_WORDS = st.sampled_from([*OPTIONS, "--partition", "-p", "--"])
_VALUES = st.one_of(
    st.integers(-(10**40), 10**40).map(str),
    st.sampled_from(["inf", "-inf", "nan", "1e308", "3x224x224", "0:0", "yes", "resnet18", "os:system"]),
    st.text(max_size=30),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.tuples(_WORDS, _VALUES).map(lambda pair: f"{pair[0]}={pair[1]}"), max_size=4),
    extra=st.dictionaries(st.text(max_size=10), st.integers() | st.text(max_size=10), max_size=3),
    raw=st.binary(max_size=200),
)
def test_no_request_body_makes_the_daemon_fail(
    daemon: Daemon, words: list[str], extra: dict[str, object], raw: bytes
) -> None:
    script = SCRIPT.format(name="fuzz").encode()
    request = {
        "script_b64": base64.b64encode(script).decode(),
        "where": "fuzz.sbatch",
        "sbatch_argv": ["fuzz.sbatch"],
        "description_args": words,
        **extra,
    }
    # A budget inside this daemon's connection deadline (3 s): a cold first answer (Slurm's estimates for
    # the candidates) then comes as "no answer within" (503), not as the deadline's close (a CI run saw
    # that once), which the fuzz is not about.
    for body in (json.dumps(request).encode(), raw):
        answer = exchange(daemon, http("POST", b"/advise", body, **{BUDGET_HEADER: "2000"}))
        assert status(answer) in (200, 400, 413, 422, 503), answer[:500]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    line=st.lists(st.tuples(_WORDS, _VALUES).map(lambda pair: f"{pair[0]}={pair[1]}"), min_size=1, max_size=3)
)
def test_whatever_the_advisor_lines_say_the_job_is_submitted_exactly_once(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path, line: list[str]
) -> None:
    name = f"fuzz{time.monotonic_ns()}"
    text = SCRIPT.format(name=name).replace(
        "#ADVISOR", "#ADVISOR " + " ".join(_quoted(word) for word in line), 1
    )
    script = tmp_path / f"{name}.sbatch"
    script.write_bytes(text.encode("utf-8", "surrogateescape"))
    result = subprocess.run(
        [str(BIN / "advise-submit"), "--hold", str(script)],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in result.stderr
    expected = 1 if result.returncode == 0 else 0
    assert len(jobs_named(local_slurm, name)) == expected, result.stderr
    plain = subprocess.run(["sbatch", "--test-only", str(script)], env=daemon.env, capture_output=True)
    assert (result.returncode == 0) == (plain.returncode == 0), "the wrapper fails only where sbatch does"


def _quoted(word: str) -> str:
    """A word as one #ADVISOR argument: sbatch's tokenizer takes double quotes, not escapes."""
    return '"' + word.replace('"', "").replace("\n", " ").replace("\r", " ") + '"'
