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
from dataclasses import dataclass
from pathlib import Path

_UCRED = struct.Struct("3i")


@dataclass(frozen=True)
class Peer:
    pid: int
    uid: int
    gid: int


def peer_credentials(connection: socket.socket) -> Peer:
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


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTPConnection whose transport is a Unix socket; ``timeout`` bounds connect and every read."""

    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.socket_path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


class DaemonUnreachable(OSError):
    """No answer: no daemon, a dead one, or one slower than the timeout."""


class DaemonRefused(RuntimeError):
    """The daemon answered with an error; the message is its own."""


def call(socket_path: Path, method: str, path: str, body: bytes | None, timeout: float) -> bytes:
    """One request to the daemon; the body of a 200 answer, else one of the two errors above."""
    connection = UnixHTTPConnection(socket_path, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
    except OSError as error:
        raise DaemonUnreachable(f"the advisor daemon at {socket_path} did not answer ({error})") from error
    finally:
        connection.close()
    if response.status != 200:
        try:
            detail = json.loads(data)["error"]
        except (ValueError, KeyError, TypeError):
            detail = data[:200].decode("utf-8", "replace")
        raise DaemonRefused(str(detail))
    return data
