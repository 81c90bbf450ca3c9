""" "My jobs": each advised job with its name and state as Slurm has them now, an array's tasks by state, and
a link to why it was advised so. Slurm is asked as the viewer; a finished array used to read "pending or
running" for ever (the store finishes no array)."""

from __future__ import annotations

import getpass
import json
import re
import time
from datetime import UTC, datetime, timedelta

import pytest

from advisor.api import AdvisedJob, Coverage, Explanation, ModelVersion, MyJobs, Overview
from advisor.daemon.transport import DaemonRefused
from advisor.predict.array_outcome import ENDED
from advisor.recommend.choose import Estimate, Recommendation
from advisor.recommend.savings import Savings
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import FinishedJob, QueuedJob
from advisor.slurm.runner import SlurmError
from advisor.slurm.values import format_seconds
from advisor.web.pages import Viewer, admin, explain, jobs
from advisor.web.states import JobStates, StatesLookup, job_states, slurm_lookup

from .test_recommend_arrays import estimated
from .web_support import get, ood

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)


def queued(job_id: int, state: str, array: int | None = None, task: int | None = None) -> QueuedJob:
    return QueuedJob(
        job_id=job_id,
        array_job_id=array,
        array_task_id=task,
        name="sweep",
        user="alice",
        uid=1000,
        partition="t4",
        state=state,
        reason="",
        submit_time=NOW,
        start_time=None,
        end_time=None,
        time_limit=None,
        node_count=1,
        cpus=1,
        gpus=1,
        gpu_type=None,
        tres_requested={},
        node_list="",
    )


def ended(job_id: int, state: str, array: int | None = None, task: int | None = None) -> FinishedJob:
    return FinishedJob(
        job_id=job_id,
        array_job_id=array,
        array_task_id=task,
        name="train",
        user="alice",
        partition="t4",
        state=state,
        submit_time=NOW,
        start_time=NOW,
        end_time=NOW + timedelta(hours=1),
        elapsed=timedelta(hours=1),
        time_limit=None,
        node_count=1,
        alloc_tres={},
        gpus=1,
        exit_code=0,
    )


def test_an_array_is_its_tasks_by_state_and_ends_once_none_waits_or_runs() -> None:
    running = [queued(12, "RUNNING", 10, 2), queued(10, "PENDING", 10, None)]
    done = [ended(10, "COMPLETED", 10, 0), ended(11, "COMPLETED", 10, 1)]
    assert job_states([10], running, done)[10] == JobStates(
        name="sweep", state="RUNNING", tasks={"COMPLETED": 2, "RUNNING": 1}, more_pending=True
    )
    all_done = [*done, ended(12, "COMPLETED", 10, 2)]
    assert job_states([10], [], all_done)[10] == JobStates(
        name="train", state="COMPLETED", tasks={"COMPLETED": 3}
    )
    one_failed = [*done, ended(12, "FAILED", 10, 2)]
    assert job_states([10], [], one_failed)[10].state == ENDED


def test_a_single_job_takes_squeue_over_accounting_and_an_unknown_one_is_left_out() -> None:
    found = job_states([5, 6, 7], [queued(5, "RUNNING")], [ended(5, "COMPLETED"), ended(6, "TIMEOUT")])
    assert found == {
        5: JobStates(name="sweep", state="RUNNING"),
        6: JobStates(name="train", state="TIMEOUT"),
    }


def advised(job_id: int, state: str | None) -> AdvisedJob:
    return AdvisedJob(
        job_id=job_id,
        submitted_at=NOW,
        partition="t4",
        predicted_s=3600,
        predicted_p90_s=4000,
        predicted_start=None,
        started_at=None,
        elapsed_s=None,
        state=state,
    )


def page_rows(lookup: StatesLookup | None) -> tuple[dict[str, dict[str, str]], str]:
    """Each job row's cells by class, as the page shows them."""
    mine = MyJobs(user="alice", jobs=[advised(10, None), advised(5, "COMPLETED"), advised(4, None)])

    def ask(method: str, path: str, body: bytes | None) -> bytes:
        assert (method, path) == ("GET", "/jobs")
        return mine.model_dump_json().encode()

    made = jobs(ask, Viewer("alice", "csrf", lookup), {})
    assert made.status == 200, made.html
    rows = re.findall(r'<tr data-job-id="(\d+)">(.*?)</tr>', made.html, re.DOTALL)
    cells = {
        job_id: dict(re.findall(r'<td class="(\w+)">(.*?)</td>', row, re.DOTALL)) for job_id, row in rows
    }
    assert all(f'href="explain?job={job_id}"' in made.html for job_id in cells), "each links to why"
    return cells, made.html


def test_my_jobs_shows_a_finished_arrays_tasks_and_every_jobs_name() -> None:
    def lookup(ids: list[int], since: datetime) -> dict[int, JobStates]:
        assert sorted(ids) == [4, 5, 10] and since == NOW
        done = [ended(10, "COMPLETED", 10, 0), ended(11, "FAILED", 10, 1), ended(5, "COMPLETED")]
        return job_states(ids, [], done)

    cells, _ = page_rows(lookup)
    assert cells["10"] == {"name": "train", "state": ENDED, "tasks": "1 completed, 1 failed"}
    assert cells["5"] == {"name": "train", "state": "COMPLETED", "tasks": "-"}
    assert cells["4"]["state"] == "not known to Slurm"


def test_without_slurm_my_jobs_keeps_the_advisors_states_and_says_why() -> None:
    def broken(ids: list[int], since: datetime) -> dict[int, JobStates]:
        raise SlurmError(["squeue", "--json"], "not found")

    cells, html = page_rows(broken)
    assert cells["10"]["state"] == "pending or running" and cells["5"]["state"] == "COMPLETED"
    assert "Slurm did not answer, the states are the advisor&#39;s: squeue --json: not found" in html


@pytest.mark.slurm
def test_a_real_arrays_tasks_are_read_as_the_user(local_slurm: SlurmClient) -> None:
    """Three tasks of ``true``, one at a time on the sandbox's one-CPU partition: Slurm's own records."""
    submitted = local_slurm.submit(
        "#!/bin/sh\ntrue\n", ["--array=0-2%1", "--partition=cpu", "--job-name=web-array", "--time=1"]
    )
    lookup = slurm_lookup(local_slurm, getpass.getuser())  # the sandbox's jobs are its own user's
    deadline = time.monotonic() + 60
    found = lookup([submitted.job_id], NOW - timedelta(days=1)).get(submitted.job_id)
    while time.monotonic() < deadline and (found is None or found.tasks != {"COMPLETED": 3}):
        time.sleep(0.5)
        found = lookup([submitted.job_id], NOW - timedelta(days=1)).get(submitted.job_id)
    assert found == JobStates(name="web-array", state="COMPLETED", tasks={"COMPLETED": 3}), json.dumps(
        found.model_dump() if found else None
    )


def told(reason: str, *candidates: Estimate) -> Explanation:
    """What the daemon kept of job 10's advice: ``candidates``, the first as submitted and chosen."""
    first = candidates[0] if candidates else None
    kept = Recommendation(
        user="alice",
        account=None,
        mode="advise",
        candidates=list(candidates),
        baseline=first,
        chosen=first,
        apply=False,
        advice=None,
        reasons=[reason],
    )
    return Explanation(
        job_id=10, request_id="r1", user="alice", offered=False, applied=False, recommendation=kept
    )


def test_why_shows_the_advice_kept_for_a_job_and_says_which_job_it_lacks() -> None:
    kept = told("no #ADVISOR job description: nothing to predict")

    def ask(method: str, path: str, body: bytes | None) -> bytes:
        if path != "/explain/10":
            raise DaemonRefused(f"no advice kept for job {path.rsplit('/', 1)[1]}", 404)
        return kept.model_dump_json().encode()

    made = explain(ask, Viewer("alice", "csrf"), {"job": "10"})
    assert made.status == 200, made.html
    assert "submitted as written (no change was offered)" in made.html
    assert "<li>no #ADVISOR job description: nothing to predict</li>" in made.html
    missing = explain(ask, Viewer("alice", "csrf"), {"job": "11"})
    assert missing.status == 404 and "no advice kept for job 11" in missing.html
    assert explain(ask, Viewer("alice", "csrf"), {"job": "x"}).status == 422


def test_why_an_array_was_advised_shows_one_tasks_figures_and_the_whole_arrays() -> None:
    task = estimated("0-99%10")
    kept = told("the job as submitted is already the best candidate", task)
    made = explain(
        lambda method, path, body: kept.model_dump_json().encode(), Viewer("alice", "csrf"), {"job": "10"}
    )
    assert made.status == 200, made.html
    headers = re.findall(r"<th>(.*?)</th>", made.html)
    assert headers[1:] == [
        "configuration",
        "wait (first task)",
        "run p50 (each task)",
        "run p90 (each task)",
        "first task ends",
        "cost (each task)",
        "all 100 tasks: cost",
        "all tasks: the last ends",
        "fits",
        "confidence",
    ]
    assert task.array is not None and task.cost is not None
    cells = re.findall(r"<td>(.*?)</td>", made.html)
    assert cells[6:9] == [
        f"{task.cost:.2f} credits",
        f"{task.array.cost:.2f} credits",
        f"in {format_seconds(task.array.last_end_s)}, 8 at once",
    ], "the policy names no unit: its default"
    assert (
        f"the last ends in about {format_seconds(task.array.last_end_s)} (13 waves of 8 side by side)"
        in made.html
    )


def test_the_admin_page_names_each_machine_beside_its_hash() -> None:
    model = ModelVersion(
        machine="a7abe6791234", version=1, created_at=NOW, active=True, heldout_mape=0.1, step_rows=10
    )
    unnamed = model.model_copy(update={"machine": "0123456789ab", "name": None})
    covered = Coverage(partition="v100", machine="a7abe6791234", last=NOW, rows=5, name="v100")
    view = Overview(
        at=NOW,
        models=[model.model_copy(update={"name": "v100"}), unnamed],
        accuracy=[],
        finished=[],
        coverage=[covered],
        tonight=[],
        queue=[],
        savings=Savings(jobs=[], did_not_train=0, not_completed=0, not_applied=0, previewed=0),
        problems=[],
    )
    made = admin(lambda method, path, body: view.model_dump_json().encode(), Viewer("root", "csrf"), {})
    assert made.status == 200, made.html
    assert "<td>v100 (a7abe679)</td><td>1</td>" in made.html and "<td>0123456789ab</td>" in made.html
    assert "<td>v100</td><td>v100 (a7abe679)</td><td>5</td>" in made.html


def test_a_links_query_reaches_the_why_page_under_either_server() -> None:
    kept = told("the job as submitted is already the best candidate")
    status, page = get(lambda method, path, body: kept.model_dump_json().encode(), "/explain?job=10")
    assert status == 200 and "Job 10: why" in page
    assert ood("/explain", headers={"QUERY_STRING": "job=10"})[0].startswith("503"), "asked: no daemon"
    assert ood("/explain")[0].startswith("422"), "no job named"
