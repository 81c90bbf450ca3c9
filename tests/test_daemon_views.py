"""The admin view's tonight's plans: made once, off the request's path, however many views ask meanwhile."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import cast

from advisor.api import NightPlan
from advisor.daemon.views import TonightPlans
from advisor.recommend.cluster import ClusterView
from advisor.slurm.client import SlurmClient

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def test_views_while_tonight_is_being_planned_start_no_second_planner() -> None:
    release, calls = threading.Event(), []

    def plan() -> list[NightPlan]:
        calls.append(threading.current_thread().name)
        release.wait(10)
        return []

    tonight = TonightPlans(ClusterView(cast(SlurmClient, None), lambda: NOW), plan)
    before = threading.active_count()
    assert [tonight.ready() for _ in range(5)] == [None] * 5, "a view while planning shows no plans"
    assert threading.active_count() == before + 1, "one planner however many views ask"
    release.set()
    planner = next(thread for thread in threading.enumerate() if thread.name == "tonight")
    planner.join(10)
    assert tonight.ready() == [] and calls == ["tonight"], "the plans made once, on their own thread"
