"""The daemon's rules that need no Slurm, with fixed clocks: single-flight caching, the pace of
``--test-only``, and what /explain tells a stranger."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import pytest

from advisor.daemon.accounting import BodyBudget
from advisor.daemon.app import AdviceService, ServiceInputs
from advisor.daemon.transport import Peer
from advisor.recommend.choose import Recommendation
from advisor.recommend.cluster import ClusterView
from advisor.slurm.client import SlurmClient
from advisor.slurm.pace import RateLimit
from advisor.store import SCHEMA_VERSION, Audit, AuditRow, NewerDatabase, Store

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def view() -> ClusterView:
    return ClusterView(cast(SlurmClient, None), lambda: NOW)


def test_identical_concurrent_asks_share_one_fetch_and_its_value() -> None:
    cluster, calls, release = view(), [], threading.Event()

    def fetch() -> int:
        calls.append(1)
        release.wait(10)
        return 42

    results: list[int] = []
    threads = [
        threading.Thread(target=lambda: results.append(cluster.cached("k", timedelta(minutes=1), fetch)))
        for _ in range(20)
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.3)  # every thread asks while the first fetch is still running
    release.set()
    for thread in threads:
        thread.join()
    assert results == [42] * 20
    assert len(calls) == 1, "one fetch for the whole burst"
    assert cluster.cached("other", timedelta(0), lambda: 7) == 7


def test_a_failed_fetch_is_every_waiters_error_and_the_next_ask_tries_again() -> None:
    cluster, started, release = view(), threading.Event(), threading.Event()

    def failing() -> int:
        started.set()
        release.wait(10)
        raise RuntimeError("slurmctld down")

    errors: list[str] = []

    def ask() -> None:
        try:
            cluster.cached("k", timedelta(minutes=1), failing)
        except RuntimeError as error:
            errors.append(str(error))

    leader = threading.Thread(target=ask)
    leader.start()
    started.wait(10)
    follower = threading.Thread(target=ask)
    follower.start()
    release.set()
    leader.join()
    follower.join()
    assert errors == ["slurmctld down"] * 2
    assert cluster.cached("k", timedelta(minutes=1), lambda: 5) == 5


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def test_the_pace_lets_a_burst_through_then_spaces_calls_by_the_rate() -> None:
    fake = FakeTime()
    pace = RateLimit(rate=10, burst=3, clock=fake.clock, sleep=fake.sleep)
    waits = [pace.acquire() for _ in range(6)]
    assert waits == pytest.approx([0, 0, 0, 0.1, 0.2, 0.3]), "each over the burst waits its turn"
    assert fake.slept == pytest.approx([0.1, 0.2, 0.3])
    fake.now += 10
    assert pace.acquire() == 0, "an idle second refills the bucket, up to the burst"
    assert [pace.acquire() for _ in range(3)] == pytest.approx([0, 0, 0.1])


def asked(request_id: str, at: datetime) -> AuditRow:
    """Alice's request at ``at``, as far as these tests read it."""
    return AuditRow(request_id=request_id, at=at, uid=1000, user="alice", recommendation="{}")


def test_another_users_advised_job_reads_exactly_like_a_job_never_advised(tmp_path: Path) -> None:
    """/explain must not tell a stranger which job ids were advised."""
    inputs = ServiceInputs(database=tmp_path / "advisor.db", policy=tmp_path / "policy.toml", specs=[])
    advisor = AdviceService(inputs, cast(SlurmClient, None), lambda: NOW)
    with advisor.store() as store:
        Audit(store).record(asked("r1", NOW))
        Audit(store).attach_job("r1", 42, applied=True)
    stranger = Peer(pid=1, uid=1001, gid=1001)
    with pytest.raises(LookupError) as advised:
        advisor.explain(stranger, 42)
    with pytest.raises(LookupError) as never:
        advisor.explain(stranger, 43)
    assert str(advised.value).replace("42", "N") == str(never.value).replace("43", "N")


def test_an_audit_from_before_offers_were_recorded_gains_the_column_and_reads_as_before(
    tmp_path: Path,
) -> None:
    """Such rows set ``applied`` when the daemon answered: it stands for the offer there."""
    path = tmp_path / "advisor.db"
    with sqlite3.connect(path) as old:
        old.execute(
            "CREATE TABLE audit (request_id TEXT PRIMARY KEY, at TEXT, uid INTEGER, user TEXT, "
            "recommendation TEXT, applied INTEGER, job_id INTEGER)"
        )
        old.execute(
            "INSERT INTO audit VALUES ('r1', ?, 1000, 'alice', ?, 1, 42)",
            [
                NOW.isoformat(),
                Recommendation(
                    user="alice",
                    account=None,
                    mode="advise",
                    candidates=[],
                    baseline=None,
                    chosen=None,
                    apply=False,
                    advice=None,
                    reasons=[],
                ).model_dump_json(),
            ],
        )
    inputs = ServiceInputs(database=path, policy=tmp_path / "policy.toml", specs=[])
    explanation = AdviceService(inputs, cast(SlurmClient, None), lambda: NOW).explain(
        Peer(pid=1, uid=1000, gid=1000), 42
    )
    assert explanation.offered and explanation.applied
    with sqlite3.connect(path) as db:
        assert "offered" in [row[1] for row in db.execute("PRAGMA table_info(audit)")]


def test_the_audit_forgets_requests_past_the_policys_retention(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("[audit]\nretention_days = 30\n", encoding="utf-8")
    inputs = ServiceInputs(database=tmp_path / "advisor.db", policy=policy, specs=[])
    advisor = AdviceService(inputs, cast(SlurmClient, None), lambda: NOW)
    with advisor.store() as store:
        for request_id, days in (("old", 31), ("edge", 29), ("new", 0)):
            Audit(store).record(asked(request_id, NOW - timedelta(days=days)))
    assert advisor.purge_audit() == 1
    with advisor.store() as store:
        assert [Audit(store).get(r) is None for r in ("old", "edge", "new")] == [True, False, False]


def test_a_database_from_a_newer_advisor_is_refused_and_an_older_one_upgraded(tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(NewerDatabase, match="restore the backup taken before the upgrade"):
        Store.open(newer)
    older = tmp_path / "older.db"
    with sqlite3.connect(older) as db:
        db.execute("CREATE TABLE audit (request_id TEXT PRIMARY KEY, at TEXT, applied INTEGER)")
    Store.open(older)
    with sqlite3.connect(older) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_the_body_budget_holds_each_caller_to_its_share_and_everyone_to_the_total() -> None:
    budget = BodyBudget(total=20, per_caller=12)
    assert budget.reserve(1000, 8) is None
    assert "uid 1000 already has" in str(budget.reserve(1000, 8)), "over its own share"
    assert budget.reserve(1001, 12) is None
    assert "too many requests" in str(budget.reserve(1002, 1)), "over the total"
    budget.release(1000, 8)
    assert budget.reserve(1002, 8) is None, "what a finished request held is free again"
    budget.release(1001, 12)
    budget.release(1002, 8)
    assert budget.held == {}
