"""What the daemon tells Prometheus and /health, from a real daemon on the sandbox: counters move with the
requests and submissions it serves, the model figures come from its database, and the TCP listener serves
nothing but the metrics and the health."""

from __future__ import annotations

import http.client
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from advisor.daemon.transport import UnixHTTPConnection
from advisor.sandbox.cluster import Sandbox

from .daemon_support import Daemon, free_port, started_daemon, submit


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    port = free_port()
    server = started_daemon(
        sandbox, tmp_path_factory.mktemp("metrics"), ADVISOR_METRICS_LISTEN=f"127.0.0.1:{port}"
    )
    server.env["METRICS_PORT"] = str(port)
    yield server
    server.stop()


def scrape(daemon: Daemon, path: str) -> tuple[int, str, bytes]:
    """GET from the TCP listener, as Prometheus does: status, content type, body."""
    connection = http.client.HTTPConnection("127.0.0.1", int(daemon.env["METRICS_PORT"]), timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.headers["Content-Type"], response.read()
    finally:
        connection.close()


def samples(daemon: Daemon) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, kind, body = scrape(daemon, "/metrics")
    assert status == 200 and kind.startswith("text/plain; version=0.0.4")
    text = body.decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def health(daemon: Daemon) -> dict[str, object]:
    connection = UnixHTTPConnection(daemon.socket, timeout=30)
    connection.request("GET", "/health")
    body: dict[str, object] = json.loads(connection.getresponse().read())
    return body


def test_the_counters_follow_what_the_daemon_served(daemon: Daemon, tmp_path: Path) -> None:
    applied = submit(daemon, tmp_path, "--yes", name="counted")
    declined = submit(daemon, tmp_path, "--no-rewrite", name="declined")
    assert applied.returncode == declined.returncode == 0, applied.stderr + declined.stderr
    seen = samples(daemon)
    assert seen[("advisor_requests_total", (("endpoint", "/advise"), ("status", "200")))] == 2
    assert seen[("advisor_requests_total", (("endpoint", "/submitted"), ("status", "200")))] == 2
    assert seen[("advisor_rewrites_total", (("outcome", "applied"),))] == 1
    assert seen[("advisor_rewrites_total", (("outcome", "declined"),))] == 1
    assert seen[("advisor_fail_open_total", ())] == 0
    assert seen[("advisor_request_seconds_count", (("endpoint", "/advise"),))] == 2
    assert seen[("advisor_slurm_commands_total", (("command", "squeue"), ("result", "ok")))] >= 1
    ages = {labels: value for (name, labels), value in seen.items() if name == "advisor_model_age_seconds"}
    assert ages and all(0 <= age < 3600 for age in ages.values()), "trained minutes ago"
    assert any(name == "advisor_model_heldout_mape" for name, _ in seen)

    broken = submit(daemon, tmp_path, "--model=nosuchnet", name="broken")
    assert broken.returncode == 0 and "submitting unchanged" in broken.stderr
    assert samples(daemon)[("advisor_fail_open_total", ())] == 1


def test_the_tcp_listener_serves_only_metrics_and_health(daemon: Daemon) -> None:
    status, _, body = scrape(daemon, "/health")
    assert status == 200 and json.loads(body)["ok"] is True
    status, _, body = scrape(daemon, "/explain/1")
    assert status == 404 and b"serves /metrics and /health only" in body


def test_health_names_stale_predictors_and_clears_when_they_are_fresh(daemon: Daemon) -> None:
    assert health(daemon)["degraded"] == []
    database = daemon.root / "advisor.db"
    with sqlite3.connect(database) as db:
        created = db.execute("SELECT machine, created_at FROM model_versions WHERE active = 1").fetchall()
        old = (datetime.now(UTC) - timedelta(days=30)).isoformat()
        db.execute("UPDATE model_versions SET created_at = ? WHERE active = 1", [old])
    try:
        degraded = health(daemon)["degraded"]
        assert isinstance(degraded, list) and len(degraded) == len(created) > 0
        assert all("is 30 days old: its advice is shown, never applied" in line for line in degraded)
    finally:
        with sqlite3.connect(database) as db:
            for machine, at in created:
                db.execute(
                    "UPDATE model_versions SET created_at = ? WHERE active = 1 AND machine = ?", [at, machine]
                )
    assert health(daemon)["degraded"] == []
