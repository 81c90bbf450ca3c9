"""The caller's HTTP, spoken on the socket without http.client (`advisor.daemon.transport`): what it sends,
and every answer it cannot read is `DaemonUnreachable` (the job then goes in as written), never a hang or
a traceback. A one-shot server on a Unix socket answers with exact bytes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from advisor.daemon import transport
from advisor.daemon.transport import DaemonRefused, DaemonUnreachable, call


@contextmanager
def answering(path: Path, answer: bytes) -> Iterator[list[bytes]]:
    """A server for one connection: it reads the request (yielded once it came), sends ``answer``, closes."""
    received: list[bytes] = []
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(path))
    listening.listen(1)

    def serve() -> None:
        connection, _ = listening.accept()
        with connection:
            request = b""
            while b"\r\n\r\n" not in request or not request.endswith(b"}"):
                request += connection.recv(65536)
            received.append(request)
            connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        thread.join(timeout=10)
        listening.close()


def test_the_request_is_http_with_its_length_budget_and_body(tmp_path: Path) -> None:
    with answering(tmp_path / "s", b'HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{"a":1}') as received:
        assert call(tmp_path / "s", "POST", "/advise", b'{"x": 2}', timeout=5) == b'{"a":1}'
    head, body = received[0].split(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /advise HTTP/1.1" and body == b'{"x": 2}'
    assert {"Host: localhost", "Connection: close", "Content-Length: 8"} <= set(lines)
    assert "Advisor-Budget-Ms: 5000" in lines and "Content-Type: application/json" in lines


def test_an_answer_without_a_length_is_read_to_the_end(tmp_path: Path) -> None:
    with answering(tmp_path / "s", b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\n{}"):
        assert call(tmp_path / "s", "POST", "/advise", b"{}", timeout=5) == b"{}"


def test_an_error_is_the_daemons_own_words(tmp_path: Path) -> None:
    body = b'{"error": "no such partition"}'
    answer = b"HTTP/1.1 422 Unprocessable\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    with (
        answering(tmp_path / "s", answer),
        pytest.raises(DaemonRefused, match="no such partition") as refused,
    ):
        call(tmp_path / "s", "POST", "/advise", b"{}", timeout=5)
    assert refused.value.status == 422


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "not an HTTP answer: 'SSH-2.0-OpenSSH_9.2'"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", "the answer ended after 2 of its 10 bytes"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n{}", "the answer's Content-Length is '-1'"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", "transfer encoding"),
        (b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n{}", "not an HTTP header: 'broken header'"),
        (b"HTTP/1.1 200 OK\r\nContent-Le", "closed before a whole answer came"),
        (b"", "closed before a whole answer came"),
        (b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 1001, "is over 1000 bytes"),
    ],
)
def test_an_answer_it_cannot_read_is_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: bytes, said: str
) -> None:
    monkeypatch.setattr(transport, "MAX_ANSWER_BYTES", 1000)
    with answering(tmp_path / "s", answer), pytest.raises(DaemonUnreachable) as unreachable:
        call(tmp_path / "s", "POST", "/advise", b"{}", timeout=5)
    assert said in str(unreachable.value)
