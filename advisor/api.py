"""The daemon's HTTP API, as data: what `advise-submit` sends and what it gets back.

Endpoints (JSON bodies, on the daemon's Unix socket):
- ``GET /health`` -> `Health`
- ``POST /advise`` `AdviseRequest` -> `AdviseResponse`: the recommendation and the exact submission to make
- ``POST /submitted`` `Submitted` -> `Health`: the job id the caller's sbatch printed, so the prediction
  can be compared with what really happens (the daemon checks the job belongs to the caller)
- ``GET /explain/JOBID`` -> `Explanation`
- ``GET /jobs`` -> `MyJobs`: the caller's advised jobs
- ``GET /admin`` -> `Overview`: for the users the settings name in ``admins`` only

Nothing here names the caller: the daemon takes the uid from the socket (SO_PEERCRED).
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from advisor.jobscript.lexer import MAX_SCRIPT_BYTES
from advisor.jobscript.rewrite import Submission
from advisor.jobscript.submission import MAX_NAMED_FILE_BYTES
from advisor.predict.calibration import Outcome, PartitionReport
from advisor.recommend.choose import Recommendation
from advisor.recommend.savings import Savings

MAX_SENT_FILES = 8
"""The most named files one request carries (a recipe, accelerate's, DeepSpeed's: a few)."""
MAX_SENT_CHARACTERS = 2 * 2**20
"""Their text in all; each is at most `MAX_NAMED_FILE_BYTES` characters, as `read_named_file` reads it."""


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AdviseRequest(_Message):
    """Unknown fields are dropped, not refused: a body that claims a uid or user name is served as the
    caller the kernel reports, like any other."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    script_b64: str = Field(max_length=(MAX_SCRIPT_BYTES * 4) // 3 + 8)
    """The batch script's exact bytes; the daemon never opens a user's files."""
    where: str
    """The script's path (or ``<stdin>``), for messages."""
    sbatch_argv: list[str]
    """sbatch's arguments as the user gave them: options, the script path and the script's arguments."""
    description_args: list[str] = []
    """`#ADVISOR` options given on the command line."""
    environ: dict[str, str] = {}
    """The caller's ``SBATCH_*`` variables, which sbatch reads as options."""
    table: dict[str, Any] | None = None
    """The layer table of a factory model, introspected in the user's own process (the daemon imports no
    user code); the daemon validates it before use."""
    files: dict[str, str] | None = None
    """The files the training command names (its recipe, accelerate's, DeepSpeed's), by the name it gives
    them, as the user's process read them (`named_files`): the daemon parses these, as data, and opens none.
    None: not read (an older client, the cli_filter); a name missing from them could not be read there."""
    preview: bool = False
    """Answered as any request, but nothing is recorded (no audit row, no request id): `advisor web`'s
    comparisons, which submit nothing."""

    @field_validator("script_b64")
    @classmethod
    def _base64(cls, value: str) -> str:
        try:
            base64.b64decode(value, validate=True)
        except ValueError:
            raise ValueError("not base64") from None
        return value

    @field_validator("files")
    @classmethod
    def _capped(cls, files: dict[str, str] | None) -> dict[str, str] | None:
        if files is None:
            return None
        if len(files) > MAX_SENT_FILES:
            raise PydanticCustomError(
                "files", f"{len(files)} named files: at most {MAX_SENT_FILES} are taken"
            )
        for name, text in files.items():
            if len(name) > 4096 or len(text) > MAX_NAMED_FILE_BYTES:
                raise PydanticCustomError(
                    "files", f"a file over {MAX_NAMED_FILE_BYTES} characters, or a name over 4096"
                )
        total = sum(len(text) for text in files.values())
        if total > MAX_SENT_CHARACTERS:
            raise PydanticCustomError(
                "files", f"named files of {total} characters: at most {MAX_SENT_CHARACTERS} are taken"
            )
        return files

    @property
    def script(self) -> bytes:
        return base64.b64decode(self.script_b64, validate=True)

    @classmethod
    def of(cls, script: bytes, **fields: Any) -> AdviseRequest:
        return cls(script_b64=base64.b64encode(script).decode("ascii"), **fields)


class AdviseResponse(_Message):
    request_id: str
    """What to report the job under; empty where the policy turns the advisor off for the caller (nothing
    of the submission is kept)."""
    recommendation: Recommendation
    submission: Submission
    """What to hand to sbatch: the job unchanged unless ``submission.rewritten``."""
    latency_ms: float


class Submitted(_Message):
    request_id: str = Field(max_length=64)
    job_id: int = Field(ge=1, le=2**32)
    """Slurm's job ids are 32-bit and start at 1."""
    applied: bool
    """Whether the job went in with the advised changes: False where the user declined them, the policy only
    advised, or Slurm refused the advised job and the job as written went in instead."""


class Health(_Message):
    ok: bool
    version: str
    policy: str = "built-in default"
    """Where the policy in force came from: its file, or the built-in default (advise only)."""
    policy_error: str | None = None
    """The last policy edit that failed to load (``policy`` says what stayed in force)."""
    degraded: list[str] = []
    """What keeps the advice from being as good as it can be: stale, missing or quarantined predictors, a
    policy that failed to load, Slurm not answering. Empty when all is well; the daemon still serves
    (fail-open). Served to anyone, so it names machines and commands, never a user's data."""
    detail: str | None = None


class Explanation(_Message):
    job_id: int
    request_id: str
    user: str
    offered: bool
    """The daemon answered with a rewrite."""
    applied: bool
    """The job went in with the advised changes."""
    recommendation: Recommendation


class AdvisedJob(_Message):
    """One of the caller's advised jobs: what was predicted, and what Slurm's history says happened (None
    until the job has started or ended)."""

    job_id: int
    submitted_at: datetime
    partition: str
    predicted_s: float
    predicted_p90_s: float
    predicted_start: datetime | None
    """The start the preferred estimator predicted (Slurm's, else the advisor's replay)."""
    started_at: datetime | None
    elapsed_s: float | None
    state: str | None


class MyJobs(_Message):
    user: str
    jobs: list[AdvisedJob]
    """Newest first, at most `MY_JOBS`."""


MY_JOBS = 200


class ModelVersion(_Message):
    machine: str
    name: str | None = None
    """The machine's readable name (`advisor.machines`); None where its fingerprint is gone."""
    version: int
    created_at: datetime
    active: bool
    heldout_mape: float | None
    """On the benchmarks it was not trained on; None where too few were held out."""
    step_rows: int


class Coverage(_Message):
    """What one partition's machine has measured."""

    partition: str
    machine: str
    name: str | None = None
    """The machine's readable name (`advisor.machines`)."""
    last: datetime
    rows: int


class NightPlan(_Message):
    """What tonight's benchmark measures on one partition (``advisor bench plan --partition``)."""

    partition: str
    machine: str | None
    """None: never benchmarked; its first night runs the coarse grid."""
    name: str | None = None
    """The machine's readable name (`advisor.machines`)."""
    measurements: int
    estimate_s: float
    budget_s: float
    covered: int
    grid_items: int


class QueueRow(_Message):
    partition: str
    gpus_used: int
    gpus: int
    running: int
    pending: int


class Overview(_Message):
    """The admins' view: the predictors and their accuracy, benchmarks, the queue, and what advice saved."""

    at: datetime
    models: list[ModelVersion]
    accuracy: list[PartitionReport]
    """Per partition, from advised jobs that finished (`advisor report`)."""
    finished: list[Outcome]
    coverage: list[Coverage]
    tonight: list[NightPlan] | None
    """None while the daemon is still planning them (the first view after it starts)."""
    queue: list[QueueRow]
    savings: Savings
    problems: list[str]
    """What could not be read (Slurm down): the rest is still shown."""


class ErrorAnswer(_Message):
    """Every error response: what went wrong, and where when a file or field is to blame."""

    error: str
