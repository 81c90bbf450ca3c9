"""The daemon on both its doors (the Unix socket and the MUNGE service on TCP) against what a hostile
caller can do with a connection: stall a big body, fill the TCP slots from several addresses, relay a
modified request, plant a FIFO as the policy; and what an unauthenticated caller gets back."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from advisor.daemon import munge
from advisor.daemon.limits import Limits
from advisor.daemon.transport import DaemonUnreachable, Service, UnixHTTPConnection, call
from advisor.sandbox.cluster import Sandbox

from .daemon_support import (
    Daemon,
    libraries_loaded,
    munged_open_to_everyone,
    serving_the_cluster,
    started_daemon,
    vm_rss,
)
from .test_service_munge import request_body

MIB = 2**20
DECLARED = 8 * MIB
SENT = 7 * MIB
STALLERS = 32
"""Connections per round, each declaring an 8 MiB body, sending 7 MiB of it and stopping: 224 MiB a round
where every body is read, at most the per-caller budget where bodies are reserved first."""
Forward = Callable[[str, bytes, str], tuple[int, str, bytes]]
"""A relay's work: the caller's path, body and credential to the status, credential and body it hands back."""
SLACK = 48 * MIB
"""What the daemon may grow by beyond its body budget while it serves a round (buffers, sockets)."""


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    server = serving_the_cluster(sandbox, tmp_path_factory.mktemp("hostile"), "--connection-deadline", "10")
    yield server
    server.stop()
    assert "Traceback" not in (server.root / "daemon.log").read_text(), "no caller makes the daemon log one"


def service(daemon: Daemon, address: tuple[str, int] | None = None) -> Service:
    where = address or ("127.0.0.1", int(daemon.env["SERVICE_PORT"]))
    return Service(daemon.socket, where, Path(daemon.env["ADVISOR_MUNGE_SOCKET"]))


def unix(daemon: Daemon) -> socket.socket:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(str(daemon.socket))
    return connection


def tcp(daemon: Daemon, source: str = "127.0.0.2") -> socket.socket:
    return socket.create_connection(
        ("127.0.0.1", int(daemon.env["SERVICE_PORT"])), timeout=10, source_address=(source, 0)
    )


def head(path: str, length: int, **headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: advisor", f"Content-Length: {length}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def stall(connection: socket.socket, **headers: str) -> int:
    """Declare an 8 MiB body, send up to 7 MiB of it, stop; the bytes the daemon took."""
    connection.settimeout(3)
    connection.sendall(head("/advise", DECLARED, **headers))
    chunk, sent = b"x" * MIB, 0
    with suppress(OSError):  # refused: the daemon answered and closed, or stopped reading
        while sent < SENT:
            sent += connection.send(chunk)
    return sent


def metric(daemon: Daemon, name: str) -> float:
    connection = UnixHTTPConnection(daemon.socket, timeout=30)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    found = [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]
    return found[0] if found else 0.0


def healthy_within(daemon: Daemon, seconds: float) -> dict[str, object]:
    connection = UnixHTTPConnection(daemon.socket, timeout=seconds)
    try:
        connection.request("GET", "/health")
        response = connection.getresponse()
        assert response.status == 200
        body: dict[str, object] = json.loads(response.read())
        return body
    finally:
        connection.close()


def stalled_rounds(daemon: Daemon, opened: Callable[[], socket.socket]) -> list[tuple[int, int, int]]:
    """Three rounds of `STALLERS` stalled bodies: per round the MiB the daemon took, and its growth in
    MiB of RSS while they stall and once they are gone."""
    assert daemon.process is not None
    pid = daemon.process.pid
    libraries_loaded(daemon)  # they take hundreds of MiB once, in the background, at the daemon's start
    baseline = vm_rss(pid)
    figures = []
    for _ in range(3):
        with ExitStack() as held:
            connections = [held.enter_context(opened()) for _ in range(STALLERS)]
            taken = [stall(connection) for connection in connections]
            time.sleep(1)
            during = vm_rss(pid)
        time.sleep(2)  # closed by the callers: whatever they held is the daemon's to give back
        figures.append((sum(taken) // MIB, (during - baseline) // MIB, (vm_rss(pid) - baseline) // MIB))
    print(f"baseline {baseline // MIB} MiB; per round (MiB taken, grown during, after): {figures}")
    return figures


@pytest.mark.parametrize("door", ["local user on the socket", "unauthenticated caller on TCP"])
def test_stalled_bodies_hold_no_more_memory_than_the_body_budget(daemon: Daemon, door: str) -> None:
    figures = stalled_rounds(daemon, (lambda: unix(daemon)) if "socket" in door else (lambda: tcp(daemon)))
    assert healthy_within(daemon, 5)["ok"] is True
    bound = (Limits().body_memory_per_caller_mib * MIB + SLACK) // MIB
    assert all(during < bound and after < bound for _, during, after in figures), f"over {bound}: {figures}"


def test_the_memory_of_stalled_bodies_is_given_back_when_their_connections_end(
    sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With a budget that lets every body in, what they held is still freed once they are gone."""
    budget = ["--body-memory", "512", "--body-memory-per-user", "512"]
    generous = started_daemon(sandbox, tmp_path_factory.mktemp("generous"), *budget)
    try:
        figures = stalled_rounds(generous, lambda: unix(generous))
    finally:
        generous.stop()
    assert all(taken > 200 for taken, _, _ in figures), "every body was read"
    assert all(after < SLACK // MIB for _, _, after in figures), figures


def test_an_unauthenticated_caller_is_refused_before_its_body_is_read(daemon: Daemon) -> None:
    with tcp(daemon) as connection:
        connection.settimeout(3)
        connection.sendall(head("/advise", DECLARED, **{munge.HEADER: "not-a-credential"}))
        answer = connection.recv(65536)  # no body sent: the answer must not wait for one
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert b"MUNGE credential refused" in answer


def test_a_401_counts_as_unauthenticated_not_fail_open_and_carries_no_credential(daemon: Daemon) -> None:
    fail_open = metric(daemon, "advisor_fail_open_total")
    refused = metric(daemon, "advisor_unauthenticated_total")
    body = request_body("stranger")
    connection = http.client.HTTPConnection(
        "127.0.0.1", int(daemon.env["SERVICE_PORT"]), timeout=30, source_address=("127.0.0.3", 0)
    )
    try:
        connection.request("POST", "/advise", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
    finally:
        connection.close()
    assert response.status == 401
    assert response.getheader(munge.HEADER) is None, "an unauthenticated caller gets no daemon credential"
    assert metric(daemon, "advisor_unauthenticated_total") == refused + 1
    assert metric(daemon, "advisor_fail_open_total") == fail_open


def test_tcp_callers_from_many_addresses_leave_the_local_socket_its_own_slots(daemon: Daemon) -> None:
    with ExitStack() as held:
        for host in range(2, 10):
            for _ in range(80):
                with suppress(OSError):
                    held.enter_context(tcp(daemon, f"127.0.0.{host}"))
        time.sleep(1)
        assert healthy_within(daemon, 5)["ok"] is True, "a local user is still answered"
        local = UnixHTTPConnection(daemon.socket, timeout=30)
        local.request("POST", "/advise", body=request_body("local"), headers={"Connection": "close"})
        assert local.getresponse().status == 200
        local.close()


@contextmanager
def relaying(forward: Forward) -> Iterator[int]:
    """A relay on a loopback port (yielded) for one request: ``forward`` turns the caller's path, body and
    credential into the status, credential and body handed back."""
    with socket.create_server(("127.0.0.1", 0)) as listening:
        thread = threading.Thread(target=_relay_one, args=(listening, forward), daemon=True)
        thread.start()
        yield int(listening.getsockname()[1])
        thread.join(60)


def _relay_one(listening: socket.socket, forward: Forward) -> None:
    connection, _ = listening.accept()
    with connection, connection.makefile("rb") as incoming:
        path = incoming.readline().split()[1].decode()
        headers = dict(line.decode().split(": ", 1) for line in iter(incoming.readline, b"\r\n"))
        headers = {name.lower(): value.strip() for name, value in headers.items()}
        body = incoming.read(int(headers["content-length"]))
        status, credential, answer = forward(path, body, headers[munge.HEADER.lower()])
        lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(answer)}", "Connection: close"]
        lines += [f"{munge.HEADER}: {credential}"] if credential else []
        connection.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + answer)


def relay_to(daemon: Daemon, *uid: str, modify: bool) -> Forward:
    """A relay that hands the daemon's answer back; with ``modify`` it sends its own request under its own
    credential (of ``uid``, else root's) instead of the caller's."""

    def forward(path: str, body: bytes, credential: str) -> tuple[int, str, bytes]:
        if modify:
            body = body.replace(b"relayed", b"swapped")
            digest = munge.request_digest("POST", path, body)
            argv = ["munge", f"--socket={daemon.env['ADVISOR_MUNGE_SOCKET']}", *uid, "--string", digest]
            credential = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
        connection = http.client.HTTPConnection("127.0.0.1", int(daemon.env["SERVICE_PORT"]), timeout=60)
        try:
            connection.request("POST", path, body=body, headers={munge.HEADER: credential})
            response = connection.getresponse()
            return response.status, response.getheader(munge.HEADER) or "", response.read()
        finally:
            connection.close()

    return forward


def test_a_relayed_answer_is_taken_only_for_the_request_it_answers(daemon: Daemon) -> None:
    trusted = {0, os.geteuid()}
    body = request_body("relayed")
    with relaying(relay_to(daemon, modify=False)) as port:
        answer = call(service(daemon, ("127.0.0.1", port)), "POST", "/advise", body, 60, trusted)
    assert json.loads(answer)["request_id"], "a relay that changes nothing is only a longer wire"
    with (
        relaying(relay_to(daemon, modify=True)) as port,
        pytest.raises(DaemonUnreachable, match="another request"),
    ):
        call(service(daemon, ("127.0.0.1", port)), "POST", "/advise", body, 60, trusted)
    with (
        munged_open_to_everyone(Path(daemon.env["ADVISOR_MUNGE_SOCKET"])),
        relaying(relay_to(daemon, "--uid=65534", "--gid=65534", modify=True)) as port,
        pytest.raises(DaemonUnreachable),
    ):
        call(service(daemon, ("127.0.0.1", port)), "POST", "/advise", body, 60, trusted)


def test_a_fifo_as_the_policy_is_refused_by_name_and_the_daemon_keeps_answering(daemon: Daemon) -> None:
    assert daemon.process is not None
    policy = daemon.root / "policy.toml"
    kept = policy.read_bytes()
    policy.unlink()
    os.mkfifo(policy)
    try:
        daemon.process.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        began = time.monotonic()
        health = healthy_within(daemon, 1)
        assert time.monotonic() - began < 1
        for _ in range(20):
            if health["policy_error"]:
                break
            time.sleep(0.25)
            health = healthy_within(daemon, 1)
        assert str(policy) in str(health["policy_error"]) and "not a regular file" in str(
            health["policy_error"]
        )
    finally:
        with suppress(OSError):  # a daemon stuck reading the FIFO is let go with an empty file
            os.close(os.open(policy, os.O_WRONLY | os.O_NONBLOCK))
        policy.unlink()
        policy.write_bytes(kept)
        daemon.process.send_signal(signal.SIGHUP)
        time.sleep(1)
    assert healthy_within(daemon, 5)["policy_error"] is None
