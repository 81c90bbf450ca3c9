"""A token bucket: how often the advisor may ask slurmctld something that costs it a scheduling pass."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimit:
    """At most ``rate`` calls a second on average and ``burst`` at once; a caller over it waits its turn
    (the wait is reserved under the lock and slept outside it, so waiting callers keep their order)."""

    def __init__(
        self,
        rate: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last = clock()

    def acquire(self) -> float:
        """Waits until this call may go; returns how long it waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= 1
            wait = max(0.0, -self._tokens / self.rate)
        if wait:
            self._sleep(wait)
        return wait
