"""SIGHUP's policy reload, off the event loop, with a read deadline.

A policy path can block on read (a FIFO, a hung network file system): read on the event loop, it froze
every connection. So the file is read on a thread of its own, and one that has not ended by
`RELOAD_DEADLINE_S` leaves the policy in force, `/health` saying so.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from advisor.daemon.app import AdviceService

log = logging.getLogger("advisor.daemon")
RELOAD_DEADLINE_S = 5.0
"""A policy file that has not been read by then (a hung file system) leaves the policy in force."""


class PolicyReload:
    """SIGHUP's policy reload, off the event loop: the loop goes on answering while the file is read, and
    a read that has not ended by `RELOAD_DEADLINE_S` is given up on (its thread left to end by itself)."""

    def __init__(self, advisor: AdviceService) -> None:
        self.advisor = advisor
        self.running: threading.Thread | None = None

    def start(self) -> None:
        if self.running is not None and self.running.is_alive():
            log.error("policy not reloaded: the reload before is still reading %s", self.advisor.policy.path)
            return
        # A thread of its own, not the loop's pool: one stuck in a read must not hold up the daemon's stop.
        self.running = threading.Thread(target=self._reload, name="policy-reload", daemon=True)
        self.running.start()
        asyncio.get_running_loop().call_later(RELOAD_DEADLINE_S, self._check, self.running)

    def _reload(self) -> None:
        self.advisor.reload()
        error = self.advisor.policy.last_error
        log.info("policy reloaded%s", f": {error}" if error else "")

    def _check(self, thread: threading.Thread) -> None:
        if thread.is_alive():
            self.advisor.policy.stalled(RELOAD_DEADLINE_S)
            log.error("policy not reloaded: %s", self.advisor.policy.last_error)
