"""What the daemon tells Prometheus: requests and their latency, fail-open answers, unauthenticated
requests, rewrites applied and declined, Slurm commands run, and each machine's model age and held-out error.

One registry per daemon (not prometheus_client's global one), so tests can run several side by side. The
model figures are read from the store at scrape time; the counters live in memory and start at zero with
each daemon, as Prometheus expects of counters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from advisor.machines import machine_names
from advisor.slurm.runner import CommandResult, Runner, SlurmError
from advisor.store import ModelRegistry, Store

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "advisor_requests",
            "Requests answered, by endpoint and status",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "advisor_request_seconds",
            "Time to answer a request, by endpoint",
            ["endpoint"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10),
            registry=self.registry,
        )
        self.fail_open = Counter(
            "advisor_fail_open",
            "Advice requests answered with an error: the wrapper submits those jobs unchanged",
            registry=self.registry,
        )
        self.unauthenticated = Counter(
            "advisor_unauthenticated",
            "TCP requests refused for a missing, forged, replayed or expired MUNGE credential (401): anyone "
            "who reaches the port can send those, so they are not counted as fail-open",
            registry=self.registry,
        )
        self.rewrites = Counter(
            "advisor_rewrites",
            "Advised jobs reported by the wrapper: submitted with the advised changes (applied) or as "
            "written although a rewrite was offered (declined: the user, or Slurm, refused it)",
            ["outcome"],
            registry=self.registry,
        )
        self.slurm_commands = Counter(
            "advisor_slurm_commands",
            "Slurm commands the daemon ran, by command and result",
            ["command", "result"],
            registry=self.registry,
        )

    def watch_models(
        self, store: Callable[[], AbstractContextManager[Store]], now: Callable[[], datetime]
    ) -> None:
        self.registry.register(_ModelCollector(store, now))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _ModelCollector(Collector):
    def __init__(
        self, store: Callable[[], AbstractContextManager[Store]], now: Callable[[], datetime]
    ) -> None:
        self.store = store
        self.now = now

    def collect(self) -> Iterator[GaugeMetricFamily]:
        age = GaugeMetricFamily(
            "advisor_model_age_seconds",
            "Age of each machine's active predictor version (machine: its hash; name: as people read it)",
            labels=["machine", "name"],
        )
        error = GaugeMetricFamily(
            "advisor_model_heldout_mape",
            "Held-out mean absolute percentage error of each machine's active version",
            labels=["machine", "name"],
        )
        with self.store() as store:
            rows = ModelRegistry(store).all_active()
            names = machine_names(store.fingerprints())
        for row in rows:
            labels = [row.machine, names.get(row.machine, "")]
            age.add_metric(labels, (self.now() - row.created_at).total_seconds())
            if row.heldout_mape is not None:
                error.add_metric(labels, row.heldout_mape)
        yield age
        yield error


class CountingRunner:
    """A `Runner` that counts each Slurm command it runs and remembers the last failure, for the metrics
    and for ``/health``."""

    def __init__(self, runner: Runner, metrics: Metrics, clock: Callable[[], float] = time.monotonic) -> None:
        self.runner = runner
        self.metrics = metrics
        self.clock = clock
        self._lock = threading.Lock()
        self.last_failure: tuple[float, str] | None = None

    def run(self, argv: Sequence[str], *, stdin: str | None = None, timeout: float) -> CommandResult:
        command = _command(argv)
        try:
            result = self.runner.run(argv, stdin=stdin, timeout=timeout)
        except SlurmError as error:
            self.metrics.slurm_commands.labels(command, "error").inc()
            if error.returncode is None:  # never answered: Slurm (or the way to it) is down
                with self._lock:
                    self.last_failure = (self.clock(), f"{command}: {error}")
            raise
        self.metrics.slurm_commands.labels(command, "ok" if result.returncode == 0 else "refused").inc()
        return result

    def failure_since(self, seconds: float) -> str | None:
        with self._lock:
            failure = self.last_failure
        return failure[1] if failure is not None and self.clock() - failure[0] <= seconds else None


def _command(argv: Sequence[str]) -> str:
    """The Slurm command's name (``env TZ=UTC sacct`` is sacct)."""
    words = [word for word in argv if not word.startswith("-") and "=" not in word and word != "env"]
    return words[0].rsplit("/", 1)[-1] if words else "?"
