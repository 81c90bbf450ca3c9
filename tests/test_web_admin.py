"""The admin page (only for the admins the daemon's settings name) and the Open OnDemand app folder."""

from __future__ import annotations

import os
import pwd
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.api import Overview
from advisor.daemon.transport import DaemonRefused
from advisor.predict.outcomes import collect_outcomes
from advisor.recommend.choose import Recommendation
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.store import AdvisedJobRow, AdvisedJobs, ModelRegistry, Store
from advisor.web.pages import Ask

from .daemon_support import SCRIPT, Daemon, started_daemon, submit
from .web_support import asker, get, ood, screenshot

REPO = Path(__file__).resolve().parent.parent


def test_under_open_ondemand_the_pages_link_below_the_apps_own_root() -> None:
    status, headers, _ = ood("")
    assert status.startswith("301") and headers["Location"] == "/pun/sys/advisor/"
    status, _, page = ood("/")
    assert status == "200 OK" and 'href="jobs"' in page and 'action="./"' in page and 'href="/' not in page
    status, _, page = ood("/jobs")
    assert status.startswith("503") and "the advisor could not answer: no daemon" in page
    form = {"model": "resnet18", "global_batch": "0", "input_shape": "3,32,32", "steps": "10"}
    status, _, page = ood("/", "POST", form=form)
    assert status.startswith("422") and 'id="global_batch-error">at least 1<' in page
    assert ood("/nothing")[0].startswith("404") and ood("/jobs", method="POST")[0].startswith("405")


def test_under_open_ondemand_a_pasted_script_is_posted_to_the_compare_page() -> None:
    status, _, page = ood("/", "POST", form={"script": "#!/bin/sh\r\necho\r\n", "script_name": "a.sh"})
    assert status.startswith("503") and "the advisor could not answer: no daemon" in page
    assert ">#!/bin/sh\r\necho\r\n</textarea>" in page, "the script stays in the form as it was sent"
    status, _, page = ood("/", "POST", form={"script": " "})
    assert status.startswith("422") and 'id="script-error">required: paste a batch script' in page
    assert ood("/", "POST", headers={"CONTENT_TYPE": "text/plain"})[0].startswith("415"), "not a form"


def test_the_ood_folder_serves_the_pages_once_copied(tmp_path: Path) -> None:
    app = tmp_path / "apps" / "sys" / "advisor"
    shutil.copytree(REPO / "ood" / "advisor", app)
    manifest = (app / "manifest.yml").read_text()
    assert manifest.startswith("---\nname: Advisor\ncategory: Jobs\n") and "description: |-" in manifest
    probe = (
        "import runpy, wsgiref.util as u\n"
        "app = runpy.run_path('passenger_wsgi.py')['application']\n"
        "import os, pwd\n"
        "env = {'PATH_INFO': '/jobs', 'HTTP_X_FORWARDED_USER': pwd.getpwuid(os.getuid()).pw_name}\n"
        "u.setup_testing_defaults(env)\n"
        "body = b''.join(app(env, lambda status, headers: print(status)))\n"
        "print(b'could not answer' in body)\n"
    )
    env = {**os.environ, "ADVISOR_PYTHON": sys.executable, "ADVISOR_SOCKET": str(tmp_path / "none.sock")}
    argv = [str(app / "bin" / "python"), "-c", probe]
    result = subprocess.run(argv, cwd=app, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["503", "Service", "Unavailable", "True"], result.stdout


@pytest.mark.slurm
def test_a_user_the_settings_do_not_name_gets_no_admin_page(sandbox: Sandbox, tmp_path: Path) -> None:
    # No admins named: the suite's own user (root in CI) is refused like any other.
    daemon = started_daemon(sandbox, tmp_path)
    try:
        with pytest.raises(DaemonRefused) as refused:
            asker(daemon)("GET", "/admin", None)
        status, page = get(asker(daemon), "/admin")
    finally:
        daemon.stop()
    assert refused.value.status == 403 and "is not one of the advisor's admins" in str(refused.value)
    assert status == 403 and 'id="refused"' in page
    assert not any(f'id="{table}"' in page for table in ("models", "accuracy", "coverage", "queue", "saved"))


@pytest.fixture(scope="module")
def admin_daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    me = pwd.getpwuid(os.getuid()).pw_name
    server = started_daemon(sandbox, tmp_path_factory.mktemp("web-admin"), ADVISOR_ADMINS=f"someone,{me}")
    yield server
    server.stop()


def _completed(store: Store, client: SlurmClient, job_id: int) -> AdvisedJobRow:
    deadline = time.monotonic() + 180
    while True:
        collect_outcomes(store, client)
        rows = [row for row in AdvisedJobs(store).finished() if row.job_id == job_id]
        if rows:
            return rows[0]
        assert time.monotonic() < deadline, f"job {job_id} never ended in Slurm's history"
        time.sleep(2)


def _planned(ask: Ask) -> Overview:
    """The view once the daemon has planned tonight's benchmarks (its first view starts planning them)."""
    deadline = time.monotonic() + 240
    while (view := Overview.model_validate_json(ask("GET", "/admin", None))).tonight is None:
        assert time.monotonic() < deadline, "tonight's plans were never made"
        time.sleep(1)
    return view


@pytest.mark.slurm
def test_an_admin_sees_the_predictors_the_benchmarks_the_queue_and_what_advice_saved(
    admin_daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    script = SCRIPT.format(name="web-admin").replace("sleep 600", "sleep 1")
    (tmp_path / "web-admin.sbatch").write_text(script, encoding="utf-8")
    submitted = submit(admin_daemon, tmp_path, "--yes", name="web-admin")
    assert submitted.returncode == 0, submitted.stderr
    store = Store.open(admin_daemon.root / "advisor.db")
    with sqlite3.connect(admin_daemon.root / "advisor.db") as db:
        job_id, advice = db.execute("SELECT job_id, recommendation FROM audit WHERE applied = 1").fetchone()
    ended = _completed(store, local_slurm, job_id)
    assert ended.state == "COMPLETED", ended

    view = _planned(asker(admin_daemon))
    registry = ModelRegistry(store).versions()
    assert [(m.machine, m.version) for m in view.models] == [(r.machine, r.version) for r in registry]
    partitions = {partition.name for partition in local_slurm.partitions()}
    assert {row.partition for row in view.queue} == partitions == {night.partition for night in view.tonight}
    # The job sleeps 1 s where a training run was predicted: it did not train as described, so it neither
    # calibrates nor counts as a saving (tests/test_savings.py counts savings by hand).
    assert [o.job_id for o in view.finished] == [job_id] and view.accuracy[0].not_comparable == 1
    recommendation = Recommendation.model_validate_json(advice)
    assert recommendation.baseline is not None and recommendation.chosen is not None
    assert recommendation.baseline.candidate.partition == "t4" != recommendation.chosen.candidate.partition
    assert view.savings.jobs == [] and view.savings.did_not_train == 1 and view.savings.previewed == 0

    status, page = get(asker(admin_daemon), "/admin")
    assert status == 200 and 'id="scatter"' in page
    assert "did not train as described (completed in under a quarter of the run predicted) 1;" in page
    assert all(f'<tr data-partition="{name}">' in page for name in partitions)
    screenshot(asker(admin_daemon), "admin", "web-admin.png", 2100, tmp_path)
