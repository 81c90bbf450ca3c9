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


BUDGET_HEADER = "Advisor-Budget-Ms"
"""How long the caller waits for the answer: a daemon that cannot answer in time says so at once (503)."""


class DaemonUnreachable(OSError):
    """No answer: no daemon, a dead one, or one slower than the timeout."""


class DaemonRefused(RuntimeError):
    """The daemon answered with an error; the message is its own."""


def call(
    socket_path: Path,
    method: str,
    path: str,
    body: bytes | None,
    timeout: float,
    trusted_uids: Collection[int] | None = None,
) -> bytes:
    """One request to the daemon within ``timeout`` seconds in all; the body of a 200 answer, else one of
    the two errors above (`UntrustedDaemon` is a `DaemonUnreachable` cause)."""
    connection = UnixHTTPConnection(socket_path, timeout=timeout, trusted_uids=trusted_uids)
    try:
        headers = {"Content-Type": "application/json", "Connection": "close"}
        headers[BUDGET_HEADER] = str(round(timeout * 1000))
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read(MAX_ANSWER_BYTES + 1)
    except (OSError, http.client.HTTPException) as error:
        raise DaemonUnreachable(f"the advisor daemon at {socket_path} did not answer ({error})") from error
    finally:
        connection.close()
    if len(data) > MAX_ANSWER_BYTES:
        raise DaemonUnreachable(f"the answer from {socket_path} is over {MAX_ANSWER_BYTES} bytes")
    if response.status != 200:
        try:
            detail = json.loads(data)["error"]
        except (ValueError, KeyError, TypeError):
            detail = data[:200].decode("utf-8", "replace")
        raise DaemonRefused(str(detail))
    return data
