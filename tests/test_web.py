"""`advisor web`: the compare form's checks, and its page against a real daemon on the sandbox."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from advisor.api import AdviseRequest, AdviseResponse
from advisor.daemon.transport import DaemonRefused
from advisor.factory_table import FactoryFailed, factory_table
from advisor.introspect import LayerTable
from advisor.introspect.run import introspect
from advisor.jobscript.lexer import MAX_SCRIPT_BYTES
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.values import format_duration
from advisor.web.forms import WHERE, Compare, directives, read_form, read_pasted, script

from .daemon_support import SCRIPT, Daemon, started_daemon, submit
from .web_support import asker, browser, down, get, post, screenshot, serving

REPO = Path(__file__).resolve().parent.parent


def _never(method: str, path: str, body: bytes | None) -> bytes:
    raise AssertionError("a form with a bad field never reaches the daemon")


GOOD = {"model": "resnet18", "input_shape": "3,32,32", "global_batch": "64", "steps": "1000"}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("global_batch", "sixty", "a whole number"),
        ("global_batch", "0", "at least 1"),
        ("steps", "", "required"),
        ("input_shape", "3,224", "three positive sizes C,H,W, such as 3,224,224"),
        ("model", "x; rm -rf /", "a torchvision model name, such as resnet50, or package.module:factory"),
        ("partition", "a100,v100", "a partition name"),
        ("time", "two days", "a time limit [D-]HH:MM:SS"),
    ],
)
def test_a_bad_field_gets_its_message_next_to_it_and_the_daemon_is_not_asked(
    field: str, value: str, message: str
) -> None:
    form, errors = read_form({**GOOD, field: value})
    assert form is None and errors == {field: message}
    status, page = post(_never, {**GOOD, field: value})
    assert status == 422 and f'id="{field}-error">{message}</span>' in page.replace("&#39;", "'")
    assert "Traceback" not in page and 'id="candidates"' not in page


def test_the_form_stands_for_the_lines_a_batch_script_would_have() -> None:
    form, errors = read_form({**GOOD, "partition": "t4", "gpus": "2", "time": "12:00:00"})
    fields = {"model": "resnet18", "input_shape": "3,32,32", "global_batch": 64, "steps": 1000}
    assert errors == {} and form == Compare(**fields, partition="t4", gpus=2, time="12:00:00")
    assert directives(form) == [
        "#SBATCH --partition=t4",
        "#SBATCH --gres=gpu:2",
        "#SBATCH --time=12:00:00",
        "#ADVISOR --model=resnet18 --input-shape=3,32,32 --global-batch=64 --steps=1000",
    ]
    assert script(form).decode().startswith("#!/bin/sh\n#SBATCH --partition=t4\n")


def test_a_daemon_that_does_not_answer_is_a_message_not_a_traceback() -> None:
    status, page = post(down, GOOD)
    assert status == 503 and "the advisor could not answer: no daemon at /run/advisor/advisor.sock" in page


class Recorder:
    """The daemon as a recorder: it keeps each request and refuses it as the daemon refuses a bad script."""

    def __init__(self, refusal: str) -> None:
        self.requests: list[AdviseRequest] = []
        self.refusal = refusal

    def __call__(self, method: str, path: str, body: bytes | None) -> bytes:
        assert (method, path) == ("POST", "/advise") and body is not None
        self.requests.append(AdviseRequest.model_validate_json(body))
        raise DaemonRefused(self.refusal, 422)


PASTED = "#!/bin/sh\r\n#SBATCH --partition=t4\r\n#ADVISOR --model=resnet18 --steps=100\r\npython train.py\r\n"


def test_a_pasted_script_is_asked_about_as_its_file_and_the_daemons_message_shows_next_to_it() -> None:
    daemon = Recorder("mine.sbatch:2: --partition=t4: no such partition")
    status, page = post(daemon, {"script": PASTED, "script_name": "C:\\fakepath\\mine.sbatch"})
    (request,) = daemon.requests
    assert request.script == PASTED.replace("\r\n", "\n").encode(), "a text area's CRLF is the file's LF"
    assert (request.where, request.sbatch_argv, request.preview, request.table) == (
        "mine.sbatch",
        ["mine.sbatch"],
        True,
        None,
    )
    assert status == 422 and 'id="script-error">mine.sbatch:2: --partition=t4: no such partition<' in page
    assert "Traceback" not in page and 'id="candidates"' not in page


@pytest.mark.parametrize(
    ("text", "name", "message"),
    [
        ("", "a.sbatch", "required: paste a batch script or choose its file"),
        (" \r\n", "a.sbatch", "required: paste a batch script or choose its file"),
        ("#!/bin/sh\n" + "#" * MAX_SCRIPT_BYTES, "a.sbatch", "at most 4 MiB, as sbatch takes"),
    ],
)
def test_what_cannot_be_a_batch_script_is_refused_next_to_it_and_the_daemon_is_not_asked(
    text: str, name: str, message: str
) -> None:
    assert read_pasted(text, name) == (None, message)
    status, page = post(_never, {"script": text, "script_name": name})
    assert status == 422 and f'id="script-error">{message}<' in page


def test_a_pasted_scripts_name_is_only_ever_a_plain_file_name() -> None:
    for name, where in [("../../x.sh", "x.sh"), ("a b.sh", WHERE), ("", WHERE), ("$(id).sh", WHERE)]:
        pasted, _ = read_pasted("#!/bin/sh\n", name)
        assert pasted is not None and pasted.where == where, name


def test_a_factory_model_is_introspected_in_a_child_of_the_page_and_its_table_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The page runs as the user, like advise-submit: the user's code runs in its child, never the daemon."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # where the user's package is importable
    daemon = Recorder("train.sbatch: refused here")
    status, page = post(daemon, {**GOOD, "model": "tests.factories.cnn:build"})
    (request,) = daemon.requests
    assert request.table is not None
    table = LayerTable.model_validate(request.table)
    assert table == introspect("tests.factories.cnn:build", (3, 32, 32), {}, allow_factories=True)
    assert status == 422 and 'id="model-error">train.sbatch: refused here<' in page


def test_a_factory_that_asks_for_too_much_memory_fails_in_its_child_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child caps its own address space (`advisor.factory_table.MEMORY_BYTES`) before the import."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    model = "--model=tests.factories.cnn:greedy --input-shape=3,8,8 --global-batch=8 --steps=9"
    text = f"#!/bin/sh\n#ADVISOR {model}\n"
    with pytest.raises(
        FactoryFailed, match=r"tests.factories.cnn:greedy could not be introspected: .*allocate"
    ):
        factory_table(text, "greedy.sbatch", [])


def test_a_factory_that_fails_is_a_message_next_to_the_model_and_the_daemon_is_not_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    status, page = post(_never, {**GOOD, "model": "tests.factories.cnn:broken"})
    assert status == 422 and "Traceback" not in page
    assert 'id="model-error">model tests.factories.cnn:broken could not be introspected: ' in page
    assert "cannot build a network 8 wide" in page


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    server = started_daemon(sandbox, tmp_path_factory.mktemp("web-daemon"))
    yield server
    server.stop()


@pytest.mark.slurm
def test_the_compare_page_shows_the_daemons_predictions_per_partition_and_marks_the_choice(
    daemon: Daemon,
) -> None:
    ask = asker(daemon)
    status, page = post(ask, {**GOOD, "partition": "t4", "gpus": "1"})
    assert status == 200, page
    form, _ = read_form({**GOOD, "partition": "t4", "gpus": "1"})
    assert form is not None
    direct = AdviseRequest.of(script(form), where=WHERE, sbatch_argv=[WHERE], preview=True)
    answer = AdviseResponse.model_validate_json(
        ask("POST", "/advise", json.dumps(direct.model_dump()).encode())
    )
    result = answer.recommendation
    assert answer.request_id == "" and result.chosen is not None
    shown = {
        (row.group(1), round(float(row.group(2))))
        for row in re.finditer(r'data-partition="([^"]+)" data-run-s="([0-9.e+-]+)"', page)
    }
    assert shown == {(e.candidate.partition, round(e.run_s)) for e in result.candidates}
    # One bar per partition that has a candidate that fits, the chosen one labelled so in the chart.
    partitions = {e.candidate.partition for e in result.candidates if e.fits}
    chosen = result.chosen.candidate.partition
    assert f"{chosen} (chosen)" in page and partitions <= {"a100", "v100", "t4"} and len(partitions) == 3
    assert '<tr class="chosen"' in page and "#ADVISOR --model=resnet18" in page
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        assert db.execute("SELECT count(*) FROM audit").fetchone()[0] == 0, "a preview is never audited"


@pytest.mark.slurm
def test_the_compare_page_warns_of_a_job_likely_killed_at_its_limit(daemon: Daemon) -> None:
    """A one-minute limit, shorter than the job's start-up: the page says so above the candidates."""
    status, page = post(asker(daemon), {**GOOD, "partition": "t4", "gpus": "1", "time": "00:01:00"})
    assert status == 200, page
    warned = re.search(r'<ul id="kill-warnings" class="warning"><li>([^<]*)</li></ul>', page)
    assert warned is not None, page
    assert re.fullmatch(r"warning: as submitted, likely killed at 00:01:00: p90 run [0-9:-]+", warned[1])
    assert page.index('id="kill-warnings"') < page.index('id="candidates"'), "seen before the table"
    status, fine = post(asker(daemon), {**GOOD, "partition": "t4", "gpus": "1", "time": "2-00:00:00"})
    assert status == 200 and 'id="candidates"' in fine and "likely killed" not in fine


@pytest.mark.slurm
def test_a_pasted_script_is_compared_as_advise_submit_would_advise_it(daemon: Daemon) -> None:
    ask = asker(daemon)
    text = SCRIPT.format(name="pasted")
    status, page = post(ask, {"script": text.replace("\n", "\r\n"), "script_name": "pasted.sbatch"})
    assert status == 200, page
    direct = AdviseRequest.of(
        text.encode(), where="pasted.sbatch", sbatch_argv=["pasted.sbatch"], preview=True
    )
    result = AdviseResponse.model_validate_json(
        ask("POST", "/advise", json.dumps(direct.model_dump()).encode())
    ).recommendation
    shown = {row.group(1) for row in re.finditer(r'data-partition="([^"]+)"', page)}
    assert shown == {e.candidate.partition for e in result.candidates} and len(shown) == 3
    assert result.chosen is not None and '<tr class="chosen"' in page
    assert ">advise-submit pasted.sbatch</pre>" in page
    status, refused = post(ask, {"script": "#SBATCH --partition=t4\nsleep 1\n", "script_name": "bad.sbatch"})
    assert status == 422 and 'id="script-error">bad.sbatch: This does not look like a batch script' in refused


@pytest.mark.slurm
@pytest.mark.skipif(shutil.which("chromedriver") is None, reason="needs Debian's chromium-driver")
def test_in_a_real_browser_the_compare_page_draws_a_bar_per_partition_and_a_bad_batch_is_marked(
    daemon: Daemon, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    shots = Path(os.environ.get("ADVISOR_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)

    ask = asker(daemon)
    with serving(ask) as served:
        shown = browser()
        try:
            shown.get(served.printed)
            assert shown.current_url == served.url, "the token leaves the address bar"
            _compare(shown, {**GOOD, "partition": "t4", "gpus": "1"})
            ticks = shown.find_elements(By.CSS_SELECTOR, "#chart svg g[id^='ytick'] text")
            labels = [tick.text for tick in ticks]
            rows = shown.find_elements(By.CSS_SELECTOR, "#candidates tr.chosen")
            marked = [row.get_attribute("data-partition") for row in rows]
            shown.save_screenshot(str(shots / "web-compare.png"))
            _compare(shown, {**GOOD, "global_batch": "0"})
            error = shown.find_element(By.ID, "global_batch-error").text
            shown.save_screenshot(str(shots / "web-compare-error.png"))
            job = tmp_path / "mine.sbatch"
            job.write_text(SCRIPT.format(name="uploaded"))
            shown.set_window_size(1200, 1800)
            shown.get(served.url)
            shown.find_element(By.ID, "upload").send_keys(str(job))
            WebDriverWait(shown, 10).until(
                lambda page: page.find_element(By.ID, "script").get_property("value")
            )
            shown.find_element(By.CSS_SELECTOR, "#pasted button").click()
            uploaded = WebDriverWait(shown, 60).until(lambda page: page.find_elements(By.ID, "command"))
            command = uploaded[0].text
            script_rows = len(shown.find_elements(By.CSS_SELECTOR, "#candidates tr[data-partition]"))
            shown.save_screenshot(str(shots / "web-compare-script.png"))
        finally:
            shown.quit()
    chosen = [label for label in labels if label.endswith(" (chosen)")]
    assert len(labels) == 3 and len(chosen) == 1, labels
    assert marked == [chosen[0].removesuffix(" (chosen)")]
    assert error == "at least 1"
    assert command == "advise-submit mine.sbatch" and script_rows >= 3, "the file was read, posted, compared"
    assert (shots / "web-compare.png").stat().st_size > 10_000


def _compare(shown: Any, values: dict[str, str]) -> None:
    """The compare form filled in and sent, as a user does."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    for name, value in values.items():
        box = shown.find_element(By.ID, name)
        box.clear()
        box.send_keys(value)
    # A mark on the old page's window, not a handle on its element: chromedriver may answer a
    # handle asked about mid-navigation with an unknown error instead of "stale" (a CI run did).
    shown.execute_script("window.beforeCompare = true;")
    shown.find_element(By.CSS_SELECTOR, "#compare button").click()
    WebDriverWait(shown, 60, ignored_exceptions=[WebDriverException]).until(
        lambda page: page.execute_script(
            "return window.beforeCompare === undefined && document.readyState === 'complete';"
        )
    )


@pytest.mark.slurm
def test_my_jobs_lists_the_callers_advised_jobs_with_what_was_predicted(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    ask = asker(daemon)
    submitted = submit(daemon, tmp_path, "--yes", name="web-mine")
    assert submitted.returncode == 0, submitted.stderr
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        job_id, predicted_s = db.execute("SELECT job_id, predicted_s FROM advised_jobs").fetchone()
    local_slurm.cancel(job_id)
    status, page = get(ask, "/jobs")
    assert status == 200, page
    row = re.search(rf'<tr data-job-id="{job_id}">(.*?)</tr>', page, re.DOTALL)
    assert row is not None, page
    assert format_duration(timedelta(seconds=round(predicted_s))) in row.group(1)
    status, refused = get(down, "/jobs")
    assert status == 503 and "the advisor could not answer: no daemon" in refused
    screenshot(ask, "jobs", "web-jobs.png", 500, tmp_path)


@pytest.mark.slurm
def test_a_pasted_array_shows_one_tasks_figures_beside_the_whole_arrays(daemon: Daemon) -> None:
    text = SCRIPT.format(name="sweep").replace("#SBATCH --gres", "#SBATCH --array=0-19%4\n#SBATCH --gres")
    status, page = post(asker(daemon), {"script": text, "script_name": "sweep.sbatch"})
    assert status == 200, page
    assert "<th>run p50 (each task)</th>" in page and "<th>all 20 tasks: cost</th>" in page
    assert "all 20 array tasks, at most 4 at once (%4): " in page
