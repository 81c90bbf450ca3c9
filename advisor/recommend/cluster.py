"""Slurm's slow-changing state, fetched at most once per freshness window and shared by every request.

The daemon answers many requests a second at peak; asking sinfo, sacct and sacctmgr for each would
cost hundreds of milliseconds per request and load the controller. Partitions and accounts change
rarely, finished-job history slowly; the queue is read once every few seconds for all requests, and
Slurm's own start estimate (``--test-only``) is shared by every request for the same resources under the
same account for half a minute. Where a scheduler keeps the history fresh (`refresh_history`, the daemon's),
no request ever waits on ``sacct``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime, timedelta
from typing import TypeVar, cast

from advisor.slurm.client import SlurmClient
from advisor.slurm.models import Association, FinishedJob, Partition
from advisor.wait.collect import take_snapshot
from advisor.wait.estimate import ask_test_only
from advisor.wait.snapshot import QueueSnapshot, SlotRequest

HISTORY = timedelta(days=14)
"""How far back finished jobs inform the actual/limit ratios of jobs the advisor did not predict."""
SNAPSHOT_FRESH_FOR = timedelta(seconds=5)
TEST_ONLY_FRESH_FOR = timedelta(seconds=30)

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
        self.background_history = False
        self.fresh_for = fresh_for
        self.history_fresh_for = history_fresh_for
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[datetime, timedelta, object]] = {}
        self._flights: dict[str, Future[object]] = {}

    def partitions(self) -> list[Partition]:
        return self.cached("partitions", self.fresh_for, self.client.partitions)

    def history(self) -> list[FinishedJob]:
        """The last history read: by `refresh_history` where a scheduler calls it, else by the first ask
        (and again once older than ``history_fresh_for``)."""
        with self._lock:
            kept = self._cache.get("history")
        if kept is not None and self.background_history:
            return cast(list[FinishedJob], kept[2])
        return self.cached(
            "history", self.history_fresh_for, lambda: self.client.history(self.clock() - HISTORY)
        )

    def refresh_history(self) -> None:
        """Reads the history now, for the requests to come: a scheduled job, so no request waits on sacct."""
        self.cached("history", timedelta(0), lambda: self.client.history(self.clock() - HISTORY))
        self.background_history = True

    def snapshot(self, now: datetime) -> QueueSnapshot:
        """The queue as all requests of the next few seconds see it: one sinfo and one squeue for all."""
        return self.cached("snapshot", SNAPSHOT_FRESH_FOR, lambda: take_snapshot(self.client, now))

    def start_estimate(
        self, candidate: SlotRequest, script: str, account: str | None
    ) -> tuple[datetime | None, str | None]:
        """Slurm's ``--test-only`` start for these resources in ``script`` under this account, shared across
        requests (the script and the job's name do not move the start; its resources and account do)."""
        key = "test-only:" + json.dumps([candidate.model_dump(mode="json"), account], sort_keys=True)
        return self.cached(key, TEST_ONLY_FRESH_FOR, lambda: ask_test_only(self.client, candidate, script))

    def default_account(self, user: str) -> str | None:
        return self.cached(
            f"account:{user}", self.history_fresh_for, lambda: self.client.default_account(user)
        )

    def associations(self, user: str) -> list[Association]:
        return self.cached(
            f"associations:{user}", self.history_fresh_for, lambda: self.client.associations(user)
        )

    def peek(self, key: str, fresh_for: timedelta) -> object | None:
        """The value under ``key`` if younger than ``fresh_for``, without ever fetching it."""
        with self._lock:
            fresh = self._fresh(key, self.clock(), fresh_for)
        return None if fresh is None else fresh[0]

    def _fresh(self, key: str, now: datetime, fresh_for: timedelta) -> tuple[object] | None:
        """The cached value, boxed (None may be a value), if younger than ``fresh_for``; the lock is held."""
        cached = self._cache.get(key)
        return (cached[2],) if cached is not None and now - cached[0] < fresh_for else None

    def cached(self, key: str, fresh_for: timedelta, fetch: Callable[[], _T]) -> _T:
        """``fetch()``'s value, reused while younger than ``fresh_for`` (zero: fetched each time anew).

        Single-flight: callers that ask for a key while it is being fetched wait for that fetch and share
        its value (or its error), so a burst of identical requests costs Slurm one query set.
        """
        now = self.clock()
        with self._lock:
            fresh = self._fresh(key, now, fresh_for)
            if fresh is not None:
                return cast(_T, fresh[0])
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = Future()
        if not leader:
            return cast(_T, flight.result())
        try:
            value = fetch()
        except BaseException as error:
            with self._lock:
                del self._flights[key]
            flight.set_exception(error)
            raise
        with self._lock:
            if len(self._cache) >= _MAX_ENTRIES:
                self._cache = {k: e for k, e in self._cache.items() if now - e[0] < e[1]}
            self._cache[key] = (now, fresh_for, value)
            del self._flights[key]
        flight.set_result(value)
        return value
