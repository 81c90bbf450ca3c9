"""Typed Slurm operations built from argv lists, a runner and the pure parsers.

Every failure, whether the command could not run, exited non-zero or printed something unparseable,
surfaces as ``SlurmError`` carrying the command and its output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from advisor.slurm.models import (
    Association,
    FinishedJob,
    Node,
    Partition,
    QueuedJob,
    Record,
    SubmitResult,
    TestOnlyResult,
)
from advisor.slurm.pace import RateLimit
from advisor.slurm.parse import (
    build_partitions,
    parse_associations,
    parse_owner,
    parse_sacct_json,
    parse_scontrol_records,
    parse_sinfo_json,
    parse_squeue_json,
    parse_submit,
    parse_test_only,
)
from advisor.slurm.runner import CommandResult, Runner, SlurmError, runner_for

if TYPE_CHECKING:
    from advisor.settings.validated import SlurmSettings

_T = TypeVar("_T")
# sbatch --test-only prints, and sacct reads, wall-clock times in the local zone of wherever they run
# (maybe a remote login node); pinning TZ makes both mean UTC.
_IN_UTC = ("env", "TZ=UTC")
# squeue's compact state codes, so a client-side filter accepts what ``--states`` accepts.
_STATE_CODES = {
    "PD": "PENDING",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "CD": "COMPLETED",
    "CA": "CANCELLED",
    "CF": "CONFIGURING",
    "F": "FAILED",
    "TO": "TIMEOUT",
    "NF": "NODE_FAIL",
    "PR": "PREEMPTED",
    "S": "SUSPENDED",
    "ST": "STOPPED",
    "OOM": "OUT_OF_MEMORY",
    "BF": "BOOT_FAIL",
    "DL": "DEADLINE",
    "RQ": "REQUEUED",
    "RH": "REQUEUE_HOLD",
    "RS": "RESIZING",
    "SE": "SPECIAL_EXIT",
}


TEST_ONLY_PER_SECOND = 20.0
"""Each ``--test-only`` makes slurmctld plan the whole queue: a burst of distinct requests waits its turn."""


class SlurmClient:
    def __init__(
        self, runner: Runner, timeout_s: float = 30, test_only_pace: RateLimit | None = None
    ) -> None:
        self._runner = runner
        self._timeout_s = timeout_s
        self._test_only_pace = test_only_pace or RateLimit(TEST_ONLY_PER_SECOND, burst=16)

    @classmethod
    def from_settings(cls, slurm: SlurmSettings) -> SlurmClient:
        """The cluster the settings reach, locally or over SSH."""
        return cls(runner_for(slurm), timeout_s=slurm.timeout_s)

    def nodes(self) -> list[Node]:
        return self._parse(self._run(["sinfo", "--json"]), parse_sinfo_json)

    def partitions(self) -> list[Partition]:
        """Partitions with their nodes; needs scontrol because 22.05's ``sinfo --json`` lists nodes only."""
        records = self._parse(self._run(["scontrol", "show", "-o", "partition"]), parse_scontrol_records)
        return build_partitions(records, self.nodes())

    def jobs(self, user: str | None = None, states: Sequence[str] | None = None) -> list[QueuedJob]:
        """Jobs in the queue, filtered here too because 22.05's ``squeue --json`` ignores its filters."""
        argv = ["squeue", "--json"]
        if user is not None:
            argv.append(f"--user={user}")
        if states:
            argv.append(f"--states={','.join(states)}")
        jobs = self._parse(self._run(argv), parse_squeue_json)
        wanted = {_STATE_CODES.get(state.upper(), state.upper()) for state in states or ()}
        return [
            job
            for job in jobs
            if (user is None or user in (job.user, str(job.uid)))
            and (not wanted or "ALL" in wanted or job.state in wanted)
        ]

    def show_job(self, job_id: int | str) -> Record:
        return self._show("job", str(job_id))

    def job_owner(self, job_id: int) -> int | None:
        """The uid of the job's owner while the controller knows the job; None once it has forgotten it.

        Asked for that one number alone: ``scontrol show -o job`` also prints what the owner chose (a name,
        a comment, paths), and a newline or a ``UserId=`` of theirs in those splits or shadows the record."""
        argv = ["squeue", "--noheader", "--states=all", f"--jobs={job_id}", "--format=%U"]
        try:
            result = self._run(argv)
        except SlurmError as error:
            if "invalid job id" in error.stderr.lower():
                return None
            raise
        return self._parse(result, parse_owner)

    def submit(
        self,
        script: str | None,
        options: Sequence[str],
        *,
        script_path: str | None = None,
        parsable: bool = False,
    ) -> SubmitResult:
        """Submit script text (sent on stdin) or a script file that already exists where sbatch runs."""
        if (script is None) == (script_path is None):
            raise ValueError("submit needs exactly one of script or script_path")
        argv = ["sbatch", *(["--parsable"] if parsable else []), *options]
        if script_path is not None:
            argv.append(script_path)
        result = self._run(argv, stdin=script)
        return self._parse(result, lambda stdout: parse_submit(stdout, parsable))

    def test_only(self, script: str, options: Sequence[str]) -> TestOnlyResult:
        """Ask the scheduler when the job would start, without submitting it."""
        self._test_only_pace.acquire()
        result = self._run([*_IN_UTC, "sbatch", "--test-only", *options], stdin=script)
        return self._parse(result, parse_test_only, text=result.stderr)

    def history(
        self,
        start: datetime,
        end: datetime | None = None,
        job_ids: Sequence[int | str] | None = None,
        users: Sequence[str] | None = None,
    ) -> list[FinishedJob]:
        """Jobs from accounting that ended; naive datetimes are taken as UTC."""
        argv = [*_IN_UTC, "sacct", "--json", f"--starttime={_slurm_time(start)}"]
        if end is not None:
            argv.append(f"--endtime={_slurm_time(end)}")
        if job_ids:
            argv.append(f"--jobs={','.join(str(job_id) for job_id in job_ids)}")
        argv.append(f"--user={','.join(users)}" if users else "--allusers")
        return self._parse(self._run(argv), parse_sacct_json)

    def default_account(self, user: str) -> str | None:
        """The account Slurm charges when a job names none; None on a cluster without accounting."""
        argv = ["sacctmgr", "--noheader", "--parsable2", "show", "user", user, "format=DefaultAccount"]
        try:
            lines = self._run(argv).stdout.split()
        except SlurmError:
            return None
        return lines[0] if lines else None

    def associations(self, user: str) -> list[Association]:
        """The user's associations: which accounts on which partitions with which QOS; empty on a cluster
        without accounting (nothing to check against)."""
        argv = ["sacctmgr", "--noheader", "--parsable2", "show", "assoc", f"where=user={user}"]
        try:
            result = self._run([*argv, "format=Account,Partition,QOS,DefaultQOS"])
        except SlurmError:
            return []
        return self._parse(result, parse_associations)

    def cancel(self, job_id: int | str, signal: str | None = None) -> None:
        self._run(["scancel", *([f"--signal={signal}"] if signal else []), str(job_id)])

    def _show(self, kind: str, name: str) -> Record:
        result = self._run(["scontrol", "show", "-o", kind, name])
        records = self._parse(result, parse_scontrol_records)
        if not records:
            raise SlurmError(result.argv, f"no such {kind}", returncode=0, stdout=result.stdout)
        return records[0]

    def _run(self, argv: Sequence[str], stdin: str | None = None) -> CommandResult:
        result = self._runner.run(argv, stdin=stdin, timeout=self._timeout_s)
        if result.returncode != 0:
            raise SlurmError(
                result.argv,
                _failure_reason(result.stderr),
                returncode=result.returncode,
                stdout=result.stdout,
                stderr=result.stderr,
            )
        return result

    def _parse(self, result: CommandResult, parse: Callable[[str], _T], text: str | None = None) -> _T:
        """Parse stdout (or ``text``), blaming the command for output we cannot read."""
        try:
            return parse(result.stdout if text is None else text)
        except ValueError as error:
            raise SlurmError(
                result.argv,
                f"unexpected output: {error}",
                returncode=result.returncode,
                stdout=result.stdout,
                stderr=result.stderr,
            ) from error


def _failure_reason(stderr: str) -> str:
    """Slurm's own words: the last ``error:`` line, else the last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line.split("error:", 1)[1].strip() for line in lines if "error:" in line]
    if errors:
        return errors[-1]
    return lines[-1] if lines else "failed"


def _slurm_time(when: datetime) -> str:
    aware = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return aware.strftime("%Y-%m-%dT%H:%M:%S")
