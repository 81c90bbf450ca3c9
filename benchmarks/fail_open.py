"""Fail-open under fire, on the real sandbox cluster: every `advise-submit` call leaves exactly one job.

1. ``--kills`` times: `advise-submit` starts, the daemon is SIGKILLed at a random point of the call (before
   it connects, while the advice is computed, after the answer, while the job is reported), and the daemon
   is started again. Counted: the jobs each call left (goal: exactly one, every time) and the audit
   database's integrity after all of them.
2. One call per hostile answer of a fake daemon (`tests/fake_daemon.py`): each must leave exactly one job,
   unchanged (goal: all 20).

Run from the repository root: ``python -m benchmarks.fail_open [--kills 50]``.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner
from tests.conftest import sandbox_spec
from tests.daemon_support import SCRIPT, Daemon, started_daemon
from tests.fake_daemon import Script, serving

BIN = Path(sys.executable).parent
HOSTILE: list[dict[str, Any]] = [
    {"env": {"LD_PRELOAD": "/home/mallory/evil.so"}},
    {"env": {"SLURM_CONF": "/nonexistent/slurm.conf"}},
    {"env": {"ADVISOR_MICRO_BATCH": "1; reboot"}},
    {"env": {"PATH": "/home/mallory/bin"}},
    {"env": {"ADVISOR_AMP=x": "fp16"}},
    {"argv": ["--export=ALL,LD_PRELOAD=/home/mallory/evil.so", "JOB"]},
    {"argv": ["--uid=0", "--gid=0", "JOB"]},
    {"argv": ["--wrap=id", "JOB"]},
    {"argv": ["--array=0-9", "JOB"]},
    {"argv": ["--partition=a100; rm -rf /", "JOB"]},
    {"argv": ["--partition=a100", "--partition=v100", "JOB"]},
    {"argv": ["--gres=gpu:8,license:99", "JOB"]},
    {"argv": ["--time=UNLIMITED", "JOB"]},
    {"argv": ["--dependency=afterok:1", "JOB"]},
    {"argv": ["--chdir=/", "JOB"]},
    {"argv": [], "stdin": "#!/bin/sh\n#SBATCH -p cpu\nid\n"},
    {"argv": ["JOB", "extra-argument"]},
    {"argv": "--uid=0"},
    {"rewritten": True, "env": {"ADVISOR_GRAD_ACCUM": 4}},
    {"argv": ["-p", "a100", "JOB"]},
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)  # noqa: S311 (where the kills land, not a secret)
    with tempfile.TemporaryDirectory(prefix="advisor-fail-open-") as folder:
        root = Path(folder)
        sandbox = Sandbox(sandbox_spec(), root / "sb")
        sandbox.up()
        try:
            slurm = SlurmClient(LocalRunner(env=sandbox.client_env()))
            daemon = started_daemon(sandbox, root / "daemon")
            try:
                _kills(daemon, slurm, root, args.kills, rng)
            finally:
                if daemon.process is not None and daemon.process.poll() is None:
                    daemon.stop()
            _hostile(daemon.env, slurm, root)
        finally:
            sandbox.down()
    return 0


def _jobs(slurm: SlurmClient, name: str) -> list[str]:
    return [job.partition for job in slurm.jobs() if job.name == name]


def _kills(daemon: Daemon, slurm: SlurmClient, root: Path, count: int, rng: random.Random) -> None:
    outcomes: Counter[str] = Counter()
    for index in range(count):
        name = f"kill{index}"
        script = root / f"{name}.sbatch"
        script.write_text(SCRIPT.format(name=name), encoding="utf-8")
        call = subprocess.Popen(
            [str(BIN / "advise-submit"), "--hold", str(script)],
            env={**daemon.env, "ADVISOR_TIMEOUT": "10"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0, 0.8))
        daemon.stop(signal.SIGKILL)
        call.wait(timeout=120)
        jobs = _jobs(slurm, name)
        outcomes[f"{len(jobs)} job" + ("" if len(jobs) == 1 else "s")] += 1
        outcomes["advised (a100/v100)" if jobs and jobs[0] != "t4" else "unchanged (t4)"] += bool(jobs)
        daemon.start()
    with sqlite3.connect(daemon.root / "advisor.db") as db:
        integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    print(f"{count} SIGKILLs of the daemon mid-call: {dict(outcomes)}; audit integrity {integrity}")


def _hostile(env: dict[str, str], slurm: SlurmClient, root: Path) -> None:
    held, sock = 0, root / "fake.sock"
    for index, change in enumerate(HOSTILE):
        name = f"hostile{index}"
        script = root / f"{name}.sbatch"
        script.write_text(SCRIPT.format(name=name), encoding="utf-8")
        sent = {"argv": ["--partition=a100", "JOB"], "rewritten": True, **change}
        if isinstance(sent["argv"], list):  # the user's own --hold kept: only the hostile part is refused
            sent["argv"] = ["--hold", *(str(script) if word == "JOB" else word for word in sent["argv"])]
        body = {"request_id": "r", "submission": sent, "recommendation": {}}
        with serving(sock, Script(body=body)):
            subprocess.run(
                [str(BIN / "advise-submit"), "--hold", str(script)],
                env={**env, "ADVISOR_SOCKET": str(sock)},
                capture_output=True,
                timeout=120,
                check=False,
            )
        held += _jobs(slurm, name) == ["t4"]
    print(f"{len(HOSTILE)} hostile answers: {held} left exactly one job, unchanged")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
