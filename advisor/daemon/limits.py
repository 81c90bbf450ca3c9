"""The daemon's limits on what callers may hold of it, apart from the server so that the command line can
show their defaults without loading it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What one caller, or all together, may hold of the daemon (`advisor daemon --help`).

    The Unix socket and the TCP service count their connections apart: nothing that reaches the TCP port
    can take a slot a local user needs."""

    connections: int = 512
    """On the Unix socket. With the TCP pool, well under the unit's LimitNOFILE, which leaves room for
    SQLite, Slurm's pipes and the logs."""
    connections_per_uid: int = 128
    tcp_connections: int = 256
    """On the TCP service, authenticated or not."""
    tcp_connections_per_host: int = 32
    tcp_unauthenticated: int = 128
    """TCP connections none of whose requests has shown a valid MUNGE credential yet: anyone who reaches
    the port can open those, so they get at most this share of the TCP pool."""
    deadline_s: float = 30.0
    """Every connection is closed this long after it opened: no client of the advisor waits longer."""
    workers: int = 8
    """Threads that compute advice (Slurm queries, predictions); fresh answers need none."""
    body_memory_mib: int = 128
    """Request bodies held in memory at once, in all; each is reserved from its Content-Length before a
    byte of it is read, and a request over the budget is refused at once (503)."""
    body_memory_per_caller_mib: int = 16
    """The same per caller (a uid, from SO_PEERCRED or MUNGE): two of the largest bodies."""
