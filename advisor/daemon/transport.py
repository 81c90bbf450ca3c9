"""HTTP over a Unix socket, both ends, from the standard library alone: the client side runs in every
`advise-submit`, which must start fast and import nothing heavy.

The server learns who is calling from the kernel (SO_PEERCRED), never from the request.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import stat
import struct
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from advisor.daemon import munge

_UCRED = struct.Struct("3i")


@dataclass(frozen=True)
class Peer:
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

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self.keep_deadline()
        return super().recv_into(buffer, nbytes, flags)


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTPConnection whose transport is a Unix socket; ``timeout`` bounds the whole exchange, from
    connect to the last byte. With ``trusted_uids``, a socket served by any other user is refused before
    anything is sent."""

    def __init__(self, path: Path, timeout: float, trusted_uids: Collection[int] | None = None) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path
        self.trusted_uids = trusted_uids
        self.deadline = time.monotonic() + timeout

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


class TcpHTTPConnection(http.client.HTTPConnection):
    """An HTTPConnection to the cluster-wide service, whose ``timeout`` bounds the whole exchange too."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.deadline = time.monotonic() + timeout

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


@dataclass(frozen=True)
class Service:
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
    headers = {"Content-Type": "application/json", "Connection": "close"}
    headers[BUDGET_HEADER] = str(round(timeout * 1000))
    connection: http.client.HTTPConnection
    digest = munge.request_digest(method, path, body or b"")
    try:
        if service.address is None:
            connection = UnixHTTPConnection(service.socket, timeout=timeout, trusted_uids=trusted_uids)
        else:
            connection = TcpHTTPConnection(*service.address, timeout=timeout)
            headers[munge.HEADER] = munge.encode(digest, service.munge_socket)
    except munge.MungeError as error:
        raise DaemonUnreachable(f"no MUNGE credential for the advisor service ({error})") from error
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read(MAX_ANSWER_BYTES + 1)
    except (OSError, http.client.HTTPException) as error:
        raise DaemonUnreachable(f"the advisor daemon at {service} did not answer ({error})") from error
    finally:
        connection.close()
    if len(data) > MAX_ANSWER_BYTES:
        raise DaemonUnreachable(f"the answer from {service} is over {MAX_ANSWER_BYTES} bytes")
    if service.address is not None:
        credential = response.getheader(munge.HEADER) or ""
        expected = munge.answer_payload(response.status, data, digest, os.geteuid())
        _check_signed(service, credential, expected, trusted_uids)
    if response.status != 200:
        try:
            detail = json.loads(data)["error"]
        except (ValueError, KeyError, TypeError):
            detail = data[:200].decode("utf-8", "replace")
        raise DaemonRefused(str(detail), response.status)
    return data


def _check_signed(
    service: Service, credential: str, expected: str, trusted_uids: Collection[int] | None
) -> None:
    """The service's answer, as MUNGE vouches for it: from a trusted uid, this very answer, and an answer
    to this very request (``expected``, `munge.answer_payload`) served for this process's uid."""
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
