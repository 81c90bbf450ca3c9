"""What each connection, and each caller, holds of the daemon: connection slots in two pools and the memory
of request bodies.

The Unix socket and the TCP service have pools of their own, so nothing that reaches the port can take a
local user's slot: on the socket connections are counted per uid (SO_PEERCRED); on TCP per host, and those
that have not yet shown a valid MUNGE credential also all together. A request body is read only once its
caller is known, into one buffer of its declared length, reserved against a budget per caller and in all
before a byte of it is read, and given back whenever the request ends, the connection's death included.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import Counter
from dataclasses import dataclass
from typing import Any

from aiohttp import StreamReader, web
from aiohttp.web_protocol import RequestHandler

from advisor.daemon.limits import Limits
from advisor.daemon.transport import Peer, peer_credentials

log = logging.getLogger("advisor.daemon")
UNIX, TCP, UNAUTHENTICATED = "the socket", "TCP", "unauthenticated TCP"
MIB = 2**20


@dataclass
class Connection:
    """One open connection: its caller where the kernel names it (None over TCP, where each request's
    credential does), the counts it is in, and the timer that closes it at the deadline."""

    peer: Peer | None
    counted: list[str]
    deadline: asyncio.TimerHandle


class CountingServer(web.Server):
    """aiohttp's server, counting connections: one over a cap of its pool is closed before it is read.

    A body the handler did not read is never read: with no lingering time, aiohttp closes the connection
    after the answer instead of draining what the caller still sends."""

    def __init__(self, handler: Any, limits: Limits, **kwargs: Any) -> None:
        super().__init__(handler, lingering_time=0, **kwargs)
        self.limits = limits
        self.accounted: dict[RequestHandler, Connection] = {}
        self.open: Counter[str] = Counter()

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        sock = transport.get_extra_info("socket")
        if sock.family == socket.AF_UNIX:
            peer = peer_credentials(sock)
            counted = [UNIX, f"uid {peer.uid}"]
        else:
            peer, counted = None, [TCP, f"host {transport.get_extra_info('peername')[0]}", UNAUTHENTICATED]
        loop = asyncio.get_running_loop()
        self.accounted[handler] = Connection(
            peer, counted, loop.call_later(self.limits.deadline_s, handler.force_close)
        )
        self.open.update(counted)
        over = [key for key in counted if self.open[key] > self._cap(key)]
        if over:
            if any(self.open[key] == self._cap(key) + 1 for key in over):
                log.warning("refusing connections of %s: %d open", over[0], self.open[over[0]])
            # Once aiohttp has set the connection up: closed from within this call it would trip it.
            loop.call_soon(handler.force_close)

    def authenticated(self, handler: RequestHandler) -> None:
        """A request on this TCP connection showed a valid credential: it leaves the unauthenticated count."""
        connection = self.accounted.get(handler)
        if connection is not None and UNAUTHENTICATED in connection.counted:
            connection.counted.remove(UNAUTHENTICATED)
            self._forget([UNAUTHENTICATED])

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        connection = self.accounted.pop(handler, None)
        if connection is not None:
            connection.deadline.cancel()
            self._forget(connection.counted)

    def _forget(self, keys: list[str]) -> None:
        self.open.subtract(keys)
        for key in keys:
            if not self.open[key]:
                del self.open[key]

    def _cap(self, key: str) -> int:
        limits = self.limits
        caps = {
            UNIX: limits.connections,
            TCP: limits.tcp_connections,
            UNAUTHENTICATED: limits.tcp_unauthenticated,
        }
        if key in caps:
            return caps[key]
        return limits.connections_per_uid if key.startswith("uid ") else limits.tcp_connections_per_host


class BodyBudget:
    """Bytes of request bodies held in memory, by caller and in all."""

    def __init__(self, total: int, per_caller: int) -> None:
        self.total = total
        self.per_caller = per_caller
        self.held: Counter[int] = Counter()

    def reserve(self, uid: int, size: int) -> str | None:
        """None once ``size`` bytes are the caller's to fill; else why not, for the 503."""
        if self.held[uid] + size > self.per_caller:
            return f"uid {uid} already has {self.held[uid] // MIB} MiB of requests being read"
        if sum(self.held.values()) + size > self.total:
            return "the advisor is reading too many requests"
        self.held[uid] += size
        return None

    def release(self, uid: int, size: int) -> None:
        self.held[uid] -= size
        if not self.held[uid]:
            del self.held[uid]


class BodyEnded(EOFError):
    """The connection ended before the body its Content-Length declared."""


async def read_body(content: StreamReader, length: int) -> bytearray:
    """The body, copied chunk by chunk into one buffer of its declared length: each chunk aiohttp hands
    over is freed as soon as it is copied, instead of a list of them living until the last arrives.

    A read that fails empties the buffer: the exception's traceback keeps this frame, and the exception
    sits in reference cycles (the request's stream keeps it too) that the collector may not break for a
    long while; a body they held would never be given back (`asyncio.IncompleteReadError` keeps the
    partial body itself)."""
    buffer = bytearray(length)
    try:
        got = 0
        with memoryview(buffer) as view:
            while got < length:
                chunk = await content.readany()
                if not chunk:
                    raise BodyEnded(f"the request body ended after {got} of {length} bytes")
                take = min(len(chunk), length - got)
                view[got : got + take] = chunk[:take]
                got += take
    except BaseException:
        buffer.clear()
        raise
    return buffer
