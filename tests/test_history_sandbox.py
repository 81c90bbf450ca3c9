"""History on the real sandbox: a user's finished runs of a script, read from Slurm's accounting, make the
next submission of that script (which describes no model) get a time limit and an explanation."""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.history.service import RunHistory
from advisor.jobscript.submission import parse_submission
from advisor.policy.load import parse_policy
from advisor.recommend.choose import Recommendation
from advisor.recommend.cluster import ClusterView
from advisor.recommend.edges import Sources, recommend_now
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import FinishedJob
from advisor.slurm.sacct_text import DUMP_FIELDS, parse_sacct_parsable
from advisor.store import Store

SCRIPT = "#!/bin/sh\n#SBATCH --partition=cpu\n#SBATCH --time=60\n#SBATCH --output=/dev/null\nsleep 2\n"


def _seen(job: FinishedJob) -> tuple[object, ...]:
    """What history reads of a job (the TRES of a text dump spell memory with a unit)."""
    times = (job.submit_time, job.start_time, job.end_time, job.elapsed, job.time_limit)
    return (job.job_id, job.name, job.user, job.partition, job.state, *times, job.gpus, job.alloc_tres["cpu"])


def test_finished_runs_of_a_script_shorten_its_next_time_limit(
    local_slurm: SlurmClient,
    sandbox: Sandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = tmp_path / "prep.sh"
    script.write_text(SCRIPT, encoding="utf-8")
    since = datetime.now(UTC) - timedelta(minutes=1)
    submitted = {local_slurm.submit(SCRIPT, ["--job-name=prep.sh"]).job_id for _ in range(3)}
    deadline = time.monotonic() + 120
    while True:
        finished = [job for job in local_slurm.history(since) if job.job_id in submitted]
        if len(finished) == 3 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert len(finished) == 3, "the three runs reached accounting"
    argv = ["sacct", "-P", "-a", "-X", "-S", since.strftime("%Y-%m-%dT%H:%M:%S"), "-o", ",".join(DUMP_FIELDS)]
    dump = subprocess.run(
        argv,
        env={**os.environ, **sandbox.client_env(), "TZ": "UTC"},
        capture_output=True,
        text=True,
        check=True,
    )
    from_text = [job for job in parse_sacct_parsable(dump.stdout, "dump") if job.job_id in submitted]
    assert sorted(map(_seen, from_text)) == sorted(map(_seen, finished)), "sacct -P says what --json says"
    user = finished[0].user
    parsed = parse_submission(script, [], {})
    assert parsed.description is None and parsed.job_name == "prep.sh"
    now = datetime.now(UTC)

    def advised(words: list[str]) -> Recommendation:
        return recommend_now(
            Sources(
                ClusterView(local_slurm, lambda: now),
                Store.open(tmp_path / "advisor.db"),
                parse_policy('mode = "rewrite"\n', "policy.toml"),
                [],
                RunHistory(tmp_path / "no-model-yet.json"),
            ),
            parse_submission(script, words, {}),
            None,
            user,
            now,
        )

    result = advised([])
    assert result.reasons[0].startswith("history: your last 3 runs of prep.sh took 00:00:0"), result.reasons
    # Three runs of seconds: the floor, a quarter of the hour asked for, is the limit.
    assert result.advice is not None and result.advice.time_limit == timedelta(minutes=15), result.reasons
    assert result.apply and "instead of 01:00:00" in result.reasons[1]
    fresh = advised(["--job-name=fresh.sh"])
    assert "no earlier run of fresh.sh" in fresh.reasons[0], "from the user's other jobs"
    monkeypatch.setenv("SLURM_CONF", sandbox.client_env()["SLURM_CONF"])
    policy = tmp_path / "policy.toml"
    policy.write_text('mode = "rewrite"\n', encoding="utf-8")
    capsys.readouterr()
    assert (
        main(["recommend", "--policy", str(policy), "--db", str(tmp_path / "advisor.db"), str(script)]) == 0
    )
    shown = capsys.readouterr().out
    assert (
        "applies: --time=00:15:00" in shown
        and "waits marked" not in shown
        and "your last 3 runs of prep.sh" in shown
    ), shown
    assert main(["history", "evaluate", "--since", "1d", "--json"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["completed"] >= 3
    assert set(evaluated["users"]) == {"jobs", "mean_accuracy", "median_error"}
    assert sum(score["jobs"] for score in evaluated["rules"].values()) == evaluated["completed"]
    assert evaluated["floor"] == 0.25, "the built-in policy: no file at the settings' path"
    policy.write_text("[time_limit]\nmin_fraction_of_request = 0\nhistory_factor = 1.3\n", encoding="utf-8")
    assert main(["history", "evaluate", "--since", "1d", "--json", "--policy", str(policy)]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["floor"] == 0 and evaluated["tradeoff"] == evaluated["tradeoff_floorless"]
    assert 1.3 in [point["factor"] for point in evaluated["tradeoff"]], "the policy's own factor is shown"
    assert main(["history", "train", "--models-dir", str(tmp_path)]) == 0
    assert "too few to train on" in capsys.readouterr().out, "a sandbox has not 200 jobs"
