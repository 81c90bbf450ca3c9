"""Arm C on real Slurm: a running ``advisor daemon`` advises each replayed job, as users' jobs are advised.

The replay starts the product's daemon beside the arm's sandbox (its own process, socket, database, caches
and worker threads), handed the replay's step times and policy on the sandbox's compressed clock
(``--step-times``, `benchmarks.harness.compressed`). Each arriving job asks it over the Unix socket as
``advise-submit`` does: ``POST /advise`` with the user's script, then, once sbatch gave the job its id,
``POST /submitted``, which links the job to its advice (the daemon's queue replay then knows its predicted
run). Arrivals ask concurrently (`benchmarks.harness.slurm`), so the daemon's own pacing and caches decide
how long each waits for its answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from advisor.api import AdviseRequest, AdviseResponse, Submitted
from advisor.daemon.step_times import StepTimes
from advisor.daemon.transport import DaemonRefused, DaemonUnreachable, call
from advisor.policy.schema import Policy
from advisor.sandbox.cluster import Sandbox
from benchmarks.harness.arms import user_pool
from benchmarks.harness.compressed import compressed_policy, compressed_times, policy_toml
from benchmarks.harness.model import Inventory, Job, QueueView, ReplayDecision
from benchmarks.harness.product import decision_of, job_script
from benchmarks.harness.truth import StepTable

BIN = Path(sys.executable).parent
ASK_TIMEOUT_S = 120.0
"""A loaded machine may keep an answer waiting; the replay fails rather than deciding without it."""
START_TIMEOUT_S = 120.0


class ReplayDaemonError(RuntimeError):
    """The daemon did not start or did not answer; the message points at its log."""


class AdvisorDaemon:
    """``advisor daemon`` for one sandbox: `decide` is arm C's `Arm`, `submitted` links a job to it."""

    def __init__(
        self,
        inventory: Inventory,
        policy: Policy,
        times: StepTimes,
        table: StepTable,
        compression: float,
    ) -> None:
        self.inventory = inventory
        self.policy = compressed_policy(policy, compression)
        self.times = compressed_times(times, compression)
        self.table = table
        self.compression = compression
        self.root: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> Path:
        assert self.root is not None, "the daemon is started"
        return self.root / "advisor.sock"

    def start(self, sandbox: Sandbox, root: Path) -> None:
        """Its files in ``root``; Slurm is the sandbox's. Returns once ``/health`` answers."""
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        (root / "policy.toml").write_text(policy_toml(self.policy), encoding="utf-8")
        fresh = self.times.model_copy(update={"made_at": datetime.now(UTC)})  # a nightly retrain's age
        (root / "step-times.json").write_text(fresh.model_dump_json(), encoding="utf-8")
        (root / "advisor.toml").write_text("", encoding="utf-8")  # no site settings file applies
        argv = [str(BIN / "advisor"), "--config", str(root / "advisor.toml"), "daemon"]
        argv += ["--socket", str(self.socket), "--db", str(root / "advisor.db")]
        argv += ["--policy", str(root / "policy.toml"), "--models-dir", str(root / "models")]
        argv += ["--gpu-specs", str(root / "no-specs"), "--step-times", str(root / "step-times.json")]
        env = {
            "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "ADVISOR_STATE_DIR": str(root),
            **sandbox.client_env(),
        }
        if os.geteuid() == 0:  # a sandbox VM's root runs the replay; a deployment runs it as its own user
            env["ADVISOR_ALLOW_ROOT"] = "1"
        with (root / "daemon.log").open("ab") as log:
            self._process = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                call(self.socket, "GET", "/health", None, timeout=5)
                return
            except DaemonUnreachable:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise ReplayDaemonError(f"advisor daemon did not start: see {self._log()}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=30)

    def _log(self) -> Path:
        assert self.root is not None
        return self.root / "daemon.log"

    def decide(self, job: Job, view: QueueView) -> ReplayDecision:
        """Arm C: the daemon's advice for the job's script (``view`` is not asked: the daemon reads the
        queue itself), in workload seconds; the request id goes with it, to link the job."""
        pool = user_pool(self.inventory, job)
        where = f"{job.arrival.name}.sbatch"
        script = job_script(job, pool, self.compression).encode()
        request = AdviseRequest.of(script, where=where, sbatch_argv=[where])
        answer = AdviseResponse.model_validate_json(self._ask("/advise", request.model_dump_json()))
        decision = decision_of(answer.recommendation, job, self.inventory, self.table, self.compression)
        return decision.model_copy(update={"request_id": answer.request_id or None})

    def submitted(self, decision: ReplayDecision, job_id: int) -> None:
        """What ``advise-submit`` tells the daemon once sbatch printed the job's id."""
        if decision.request_id is None:
            return
        applied = decision.predicted_run_s is not None
        note = Submitted(request_id=decision.request_id, job_id=job_id, applied=applied)
        self._ask("/submitted", note.model_dump_json())

    def _ask(self, path: str, body: str) -> bytes:
        try:
            return call(self.socket, "POST", path, body.encode(), timeout=ASK_TIMEOUT_S)
        except (DaemonUnreachable, DaemonRefused) as error:
            raise ReplayDaemonError(f"{error}; its log: {self._log()}") from error
