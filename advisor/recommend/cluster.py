"""Slurm's slow-changing state, fetched at most once per freshness window and shared by every request.

The daemon answers many requests a second at peak; asking sinfo, sacct and sacctmgr for each would
cost hundreds of milliseconds per request and load the controller. Partitions and accounts change
rarely, finished-job history slowly; queue waits are reused for a few seconds only, and only by requests
for exactly the same resources.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar, cast

from advisor.slurm.client import SlurmClient
from advisor.slurm.models import FinishedJob, Partition

HISTORY = timedelta(days=14)
"""How far back finished jobs inform the actual/limit ratios of jobs the advisor did not predict."""

_T = TypeVar("_T")
_MAX_ENTRIES = 4096
"""Past this many entries the stale ones go: every distinct request adds its own keys."""


class ClusterView:
    def __init__(
        self,
        client: SlurmClient,
        clock: Callable[[], datetime],
        fresh_for: timedelta = timedelta(minutes=1),
        history_fresh_for: timedelta = timedelta(minutes=10),
    ) -> None:
        self.client = client
        self.clock = clock
        self.fresh_for = fresh_for
        self.history_fresh_for = history_fresh_for
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[datetime, timedelta, object]] = {}

    def partitions(self) -> list[Partition]:
        return self.cached("partitions", self.fresh_for, self.client.partitions)

    def history(self) -> list[FinishedJob]:
        return self.cached(
            "history", self.history_fresh_for, lambda: self.client.history(self.clock() - HISTORY)
        )

    def default_account(self, user: str) -> str | None:
        return self.cached(
            f"account:{user}", self.history_fresh_for, lambda: self.client.default_account(user)
        )

    def cached(self, key: str, fresh_for: timedelta, fetch: Callable[[], _T]) -> _T:
        """``fetch()``'s value, reused while younger than ``fresh_for`` (zero: always fetched)."""
        now = self.clock()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and now - cached[0] < fresh_for:
            return cast(_T, cached[2])
        value = fetch()
        with self._lock:
            if len(self._cache) >= _MAX_ENTRIES:
                self._cache = {k: e for k, e in self._cache.items() if now - e[0] < e[1]}
            self._cache[key] = (now, fresh_for, value)
        return value
