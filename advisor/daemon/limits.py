"""The daemon's limits on what local users may hold of it, apart from the server so that the command line
can show their defaults without loading it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What one local user, or all together, may hold of the daemon (`advisor daemon --help`)."""

    connections: int = 512
    """Well under the unit's LimitNOFILE, which leaves room for SQLite, Slurm's pipes and the logs."""
    connections_per_uid: int = 128
    deadline_s: float = 30.0
    """Every connection is closed this long after it opened: no client of the advisor waits longer."""
    workers: int = 8
    """Threads that compute advice (Slurm queries, predictions); fresh answers need none."""
