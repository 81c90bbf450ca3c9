"""HTTP over a Unix socket, both ends, from the standard library alone: the client side runs in every
`advise-submit` and in every plain sbatch's cli_filter helper, which must start fast. It speaks HTTP/1.1 on
the socket itself, one request per connection, rather than load http.client, whose ssl and email packages
were about a third of the helper's start-up; `munge` loads only for the cluster-wide service.

The server learns who is calling from the kernel (SO_PEERCRED), never from the request.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol

_UCRED = struct.Struct("3i")


class Peer(NamedTuple):
    """A process, by the kernel's word. The records here are NamedTuples: a dataclass loads `inspect`,
    about 7 ms of every sbatch's cli_filter helper."""

    pid: int
    uid: int
    gid: int


class _Socket(Protocol):
    def getsockopt(self, level: int, option: int, size: int, /) -> bytes: ...


def peer_credentials(connection: _Socket) -> Peer:
    """The process at the other end of a Unix socket, as the kernel recorded it at connect time."""
    raw = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return Peer(pid=pid, uid=uid, gid=gid)


class UnsafeSocketDirectory(RuntimeError):
    """Someone else could replace the socket: refuse to listen there."""


def check_socket_directory(directory: Path) -> None:
    """Others may write to the folder only if it is sticky (like /tmp): then none can replace the socket."""
    info = directory.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeSocketDirectory(f"{directory} is not a directory")
    others_write = info.st_mode & (stat.S_IWOTH | stat.S_IWGRP)
    if others_write and not info.st_mode & stat.S_ISVTX:
        raise UnsafeSocketDirectory(
            f"{directory} is writable by others without the sticky bit (mode {stat.filemode(info.st_mode)}): "
            "anyone could replace the advisor's socket"
        )
    if info.st_uid not in (os.geteuid(), 0):
        raise UnsafeSocketDirectory(f"{directory} belongs to uid {info.st_uid}, neither this user nor root")


MAX_ANSWER_BYTES = 16 * 2**20
"""More than any answer of the daemon's: a bigger one is not the advisor talking."""


class UntrustedDaemon(ConnectionError):
    """The socket is served by a process of a user the client does not trust to advise it."""


class _DeadlineSocket(socket.socket):
    """A socket whose every send and receive gets only what is left of one deadline: a peer that trickles
    its answer a byte at a time cannot stretch the call past it."""

    deadline = float("inf")

    def keep_deadline(self) -> None:
        """The socket's timeout set to what is left of the deadline; past it, a TimeoutError."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the advisor daemon did not answer in time")
        self.settimeout(left)

    def sendall(self, data: Any, flags: int = 0) -> None:
        self.keep_deadline()
        super().sendall(data, flags)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        self.keep_deadline()
        return super().recv(bufsize, flags)


class BadAnswer(ConnectionError):
    """What came back is not an HTTP answer this client reads."""


HEAD_LIMIT = 64 * 1024
"""More than the status line and headers of any answer of the daemon's."""
_OWN_HEADERS = {"host", "connection", "content-length"}


class Response(NamedTuple):
    """One answer, read whole (its body at most ``MAX_ANSWER_BYTES`` and one byte, so too big is seen);
    header names in lower case."""

    status: int
    headers: dict[str, str]
    body: bytes

    def read(self, amount: int | None = None) -> bytes:
        return self.body if amount is None else self.body[:amount]

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)


class _Connection:
    """One request and its answer, http.client's three calls (request, getresponse, close) on a socket
    the subclass opens; ``timeout`` bounds the whole exchange, from connect to the last byte."""

    host = "localhost"

    def __init__(self, timeout: float) -> None:
        self.deadline = time.monotonic() + timeout
        self.sock: _DeadlineSocket | None = None

    def connect(self) -> None:
        raise NotImplementedError

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}", "Connection: close"]
        if body is not None or method not in ("GET", "HEAD"):
            lines.append(f"Content-Length: {len(body or b'')}")
        lines += [
            f"{name}: {value}" for name, value in (headers or {}).items() if name.lower() not in _OWN_HEADERS
        ]
        self.sock.sendall("\r\n".join([*lines, "", ""]).encode("latin-1") + (body or b""))

    def getresponse(self) -> Response:
        if self.sock is None:
            raise BadAnswer("no request was sent")
        data = bytearray()
        while (end := data.find(b"\r\n\r\n")) < 0:
            if len(data) > HEAD_LIMIT:
                raise BadAnswer(f"the answer's head is over {HEAD_LIMIT} bytes")
            chunk = self.sock.recv(65536)
            if not chunk:
                raise BadAnswer("the connection closed before a whole answer came")
            data += chunk
        status, headers = _head(data[:end].decode("latin-1"))
        return Response(status, headers, _body(self.sock, data[end + 4 :], headers))

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _head(text: str) -> tuple[int, dict[str, str]]:
    """The status and headers of ``HTTP/1.x NNN REASON`` and its header lines."""
    status_line, *lines = text.split("\r\n")
    words = status_line.split(" ", 2)
    if (
        len(words) < 2
        or not words[0].startswith("HTTP/1.")
        or not (len(words[1]) == 3 and words[1].isdigit())
    ):
        raise BadAnswer(f"not an HTTP answer: {status_line[:80]!r}")
    headers = {}
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon:
            raise BadAnswer(f"not an HTTP header: {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "identity").lower() != "identity":
        raise BadAnswer("the answer comes in a transfer encoding this client does not read")
    return int(words[1]), headers


def _body(sock: _DeadlineSocket, start: bytearray, headers: dict[str, str]) -> bytes:
    """The body: ``Content-Length`` bytes, else up to the end of the connection; either way no more than
    ``MAX_ANSWER_BYTES`` and one."""
    length = headers.get("content-length")
    if length is not None and not length.isdigit():
        raise BadAnswer(f"the answer's Content-Length is {length[:40]!r}")
    wanted = min(int(length) if length is not None else MAX_ANSWER_BYTES + 1, MAX_ANSWER_BYTES + 1)
    data = start
    while len(data) < wanted:
        chunk = sock.recv(min(wanted - len(data), 1 << 20))
        if not chunk:
            if length is not None:
                raise BadAnswer(f"the answer ended after {len(data)} of its {length} bytes")
            break
        data += chunk
    return bytes(data[:wanted])


class UnixHTTPConnection(_Connection):
    """A connection over a Unix socket. With ``trusted_uids``, a socket served by any other user is refused
    before anything is sent."""

    def __init__(self, path: Path, timeout: float, trusted_uids: Collection[int] | None = None) -> None:
        super().__init__(timeout)
        self.socket_path = path
        self.trusted_uids = trusted_uids

    def connect(self) -> None:
        sock = _DeadlineSocket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.deadline = self.deadline
        try:
            sock.keep_deadline()
            sock.connect(str(self.socket_path))
            if self.trusted_uids is not None:
                server = peer_credentials(sock)
                if server.uid not in self.trusted_uids:
                    raise UntrustedDaemon(
                        f"{self.socket_path} is served by uid {server.uid}, not by the advisor's user"
                    )
        except OSError:
            sock.close()
            raise
        self.sock = sock


class TcpHTTPConnection(_Connection):
    """A connection to the cluster-wide service."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        super().__init__(timeout)
        self.host, self.port = host, port

    def connect(self) -> None:
        family, kind, proto, _, address = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)[0]
        sock = _DeadlineSocket(family, kind, proto)
        sock.deadline = self.deadline
        try:
            sock.keep_deadline()
            sock.connect(address)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class Service(NamedTuple):
    """Where the daemon is: its Unix socket on this host, or the cluster-wide service over TCP with MUNGE."""

    socket: Path
    address: tuple[str, int] | None = None
    munge_socket: Path | None = None

    def __str__(self) -> str:
        return str(self.socket) if self.address is None else f"{self.address[0]}:{self.address[1]}"


BUDGET_HEADER = "Advisor-Budget-Ms"
"""How long the caller waits for the answer: a daemon that cannot answer in time says so at once (503)."""


class DaemonUnreachable(OSError):
    """No answer: no daemon, a dead one, or one slower than the timeout."""


class DaemonRefused(RuntimeError):
    """The daemon answered with an error; the message is its own, ``status`` its HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def call(
    service: Service | Path,
    method: str,
    path: str,
    body: bytes | None,
    timeout: float,
    trusted_uids: Collection[int] | None = None,
) -> bytes:
    """One request to the daemon within ``timeout`` seconds in all; the body of a 200 answer, else one of
    the two errors above (`UntrustedDaemon` is a `DaemonUnreachable` cause). Over TCP the request carries
    a MUNGE credential of this process, and only an answer signed by a trusted uid is read."""
    service = service if isinstance(service, Service) else Service(service)
    if service.address is None:
        connection = UnixHTTPConnection(service.socket, timeout=timeout, trusted_uids=trusted_uids)
        response = _exchange(service, connection, method, path, body, _headers(timeout))
    else:
        response = _signed_exchange(service, method, path, body, timeout, trusted_uids)
    if response.status != 200:
        try:
            detail = json.loads(response.body)["error"]
        except (ValueError, KeyError, TypeError):
            detail = response.body[:200].decode("utf-8", "replace")
        raise DaemonRefused(str(detail), response.status)
    return response.body


def _headers(timeout: float) -> dict[str, str]:
    """Every request's headers: a JSON body, and how long the caller waits for the answer."""
    return {"Content-Type": "application/json", BUDGET_HEADER: str(round(timeout * 1000))}


def _exchange(
    service: Service,
    connection: _Connection,
    method: str,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
) -> Response:
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
    except OSError as error:
        raise DaemonUnreachable(f"the advisor daemon at {service} did not answer ({error})") from error
    finally:
        connection.close()
    if len(response.body) > MAX_ANSWER_BYTES:
        raise DaemonUnreachable(f"the answer from {service} is over {MAX_ANSWER_BYTES} bytes")
    return response


def _signed_exchange(
    service: Service,
    method: str,
    path: str,
    body: bytes | None,
    timeout: float,
    trusted_uids: Collection[int] | None,
) -> Response:
    """The exchange with the cluster-wide service: the request signed by MUNGE, and the answer checked."""
    from advisor.daemon import (
        munge,
    )  # loaded by the service's callers only: no subprocess on the socket's way

    assert service.address is not None
    connection = TcpHTTPConnection(*service.address, timeout=timeout)  # the deadline counts munge's time too
    digest = munge.request_digest(method, path, body or b"")
    try:
        headers = {**_headers(timeout), munge.HEADER: munge.encode(digest, service.munge_socket)}
    except munge.MungeError as error:
        raise DaemonUnreachable(f"no MUNGE credential for the advisor service ({error})") from error
    response = _exchange(service, connection, method, path, body, headers)
    credential = response.getheader(munge.HEADER) or ""
    expected = munge.answer_payload(response.status, response.body, digest, os.geteuid())
    _check_signed(service, credential, expected, trusted_uids)
    return response


def _check_signed(
    service: Service, credential: str, expected: str, trusted_uids: Collection[int] | None
) -> None:
    """The service's answer, as MUNGE vouches for it: from a trusted uid, this very answer, and an answer
    to this very request (``expected``, `munge.answer_payload`) served for this process's uid."""
    from advisor.daemon import munge

    try:
        signed = munge.decode(credential, service.munge_socket)
    except munge.MungeError as error:
        raise DaemonUnreachable(
            f"the answer from {service} carries no valid MUNGE credential ({error})"
        ) from error
    if trusted_uids is not None and signed.uid not in trusted_uids:
        raise DaemonUnreachable(
            f"{service} is served by uid {signed.uid}, not by the advisor's user",
        ) from UntrustedDaemon(str(service))
    if signed.payload == expected:
        return
    answer, _, bound = signed.payload.partition(" ")
    if answer != expected.partition(" ")[0]:
        raise DaemonUnreachable(f"the answer from {service} is not the one its credential signs")
    raise DaemonUnreachable(
        f"the answer from {service} was signed for another request or caller ({bound[:120]})"
    )
