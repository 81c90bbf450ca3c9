"""SIGHUP's policy reload, off the event loop, with a read deadline.

A policy path can block on read (a hung network file system): read on the event loop, it froze every
connection. So the file is read on a thread of its own, and a read that has not ended by
`RELOAD_DEADLINE_S` leaves the policy in force, `/health` saying so. A SIGHUP that comes while a read is
under way is not dropped: that read may have seen the file before the admin's last edit, so the file is
read once more when it ends (however many SIGHUPs came meanwhile), and never by two threads at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from advisor.policy.holder import PolicyHolder

log = logging.getLogger("advisor.daemon")
RELOAD_DEADLINE_S = 5.0
"""A policy file that has not been read by then (a hung file system) leaves the policy in force."""


class PolicyReload:
    """SIGHUP's policy reload on a thread of its own: the loop goes on answering while the file is read,
    a read still going at `RELOAD_DEADLINE_S` is reported as stalled, and SIGHUPs during a read queue one
    more read."""

    def __init__(self, policy: PolicyHolder, loop: asyncio.AbstractEventLoop) -> None:
        self.policy = policy
        self.loop = loop
        self.lock = threading.Lock()
        self.reads = 0
        """Counts the reads begun, so that a deadline check knows whether its read is still the one going."""
        self.reading = False
        self.again = False

    def start(self) -> None:
        """SIGHUP's handler, on the event loop."""
        with self.lock:
            if self.reading:
                self.again = True
                log.info("policy reload queued: the reload before is still reading %s", self.policy.path)
                return
            self.reading = True
        # A thread of its own, not the loop's pool: one stuck in a read must not hold up the daemon's stop.
        threading.Thread(target=self._read_until_current, name="policy-reload", daemon=True).start()

    def _read_until_current(self) -> None:
        while True:
            with self.lock:
                self.again = False
                self.reads += 1
                read = (self.reads, self.policy.generation)
            self.loop.call_soon_threadsafe(self.loop.call_later, RELOAD_DEADLINE_S, self._check, read)
            error = self.policy.reload()
            log.info("policy reloaded%s", f": {error}" if error else "")
            with self.lock:
                if not self.again:
                    self.reading = False
                    return

    def _check(self, read: tuple[int, int]) -> None:
        """``read`` is its number and the policy's generation when it began: one that has put a policy in
        force has ended, even if its thread has not yet said so."""
        with self.lock:
            stuck = self.reading and (self.reads, self.policy.generation) == read
        if stuck:
            self.policy.stalled(RELOAD_DEADLINE_S)
            log.error("policy not reloaded: %s", self.policy.last_error)
