"""The sandbox cluster's answers, recorded for `advisor.slurm.testing.RecordedRunner`.

`python -m tests.slurm_recording` starts a sandbox, records it into `RECORDING` and stops it;
`tests/test_slurm_recording.py` records the running sandbox again and checks the file still reads the same.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import CommandResult, LocalRunner, Runner
from advisor.slurm.testing import record, save

RECORDING = Path(__file__).parent / "data" / "slurm" / "sandbox-22.05.recording.json"
JOB = "#!/bin/sh\n#SBATCH --output=/dev/null\nsleep {seconds}\n"
WHEN = "2026-01-01T00:00:00"
"""sacct's start of history in the recording: any time before the sandbox's first job."""


def recorded(runner: Runner) -> list[CommandResult]:
    """One answer per command the adapter runs, with one job running and one waiting behind it on t4."""
    client = SlurmClient(runner, timeout_s=30)
    finished = client.submit(JOB.format(seconds=0), ["--partition=cpu", "--job-name=done"])
    running = client.submit(JOB.format(seconds=600), ["--partition=t4", "--gres=gpu:2", "--job-name=run"])
    waiting = client.submit(
        JOB.format(seconds=600), ["--partition=t4", "--nodes=2", "--exclusive", "--job-name=wait"]
    )
    try:
        _until(lambda: {job.job_id: job.state for job in client.jobs()}.get(running.job_id) == "RUNNING")
        _until(lambda: any(job.job_id == finished.job_id for job in client.history(_since())))
        test_only = ["--partition=t4", "--gres=gpu:1", "--time=01:00:00"]
        account = ["sacctmgr", "--noheader", "--parsable2", "show", "user", "root", "format=DefaultAccount"]
        return [
            record(runner, ["sinfo", "--json"], 2),
            record(runner, ["scontrol", "show", "-o", "partition"], 4),
            record(runner, ["squeue", "--json"], 2),
            record(runner, ["env", "TZ=UTC", "sbatch", "--test-only", *test_only], 4, JOB.format(seconds=1)),
            record(runner, ["env", "TZ=UTC", "sacct", "--json", f"--starttime={WHEN}", "--allusers"], 3),
            record(runner, account, 1),
        ]
    finally:
        for job in (running, waiting):
            client.cancel(job.job_id)


def _since() -> datetime:
    return datetime.fromisoformat(WHEN).replace(tzinfo=UTC)


def _until(condition: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the sandbox did not get there")
        time.sleep(0.5)


def main() -> int:
    from tests.conftest import sandbox_spec

    with tempfile.TemporaryDirectory() as folder:
        sandbox = Sandbox(sandbox_spec(), Path(folder))
        sandbox.up()
        try:
            save(recorded(LocalRunner(env=sandbox.client_env())), RECORDING)
        finally:
            sandbox.down()
    print(f"recorded {RECORDING}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
