"""``sacct --parsable2`` dumps (``sacct -P -a -X -o FIELDS``), the text form an admin already has, read into
the same `FinishedJob` records as ``sacct --json``. Times are read as UTC: dump with ``TZ=UTC``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from advisor.slurm.models import FinishedJob
from advisor.slurm.values import parse_duration, parse_tres

FIELDS = ("JobID", "User", "JobName", "Partition", "State", "Submit", "Start", "End", "Elapsed", "Timelimit")
"""What a dump must have; the rest of `DUMP_FIELDS` is read where present."""
DUMP_FIELDS = (*FIELDS, "JobIDRaw", "NNodes", "AllocTRES", "ExitCode")
DUMP_COMMAND = "TZ=UTC sacct -P -a -X -S START -o " + ",".join(DUMP_FIELDS)


def parse_sacct_parsable(text: str, where: str) -> list[FinishedJob]:
    """Jobs (not their steps) that ended; a line that does not read raises ValueError naming it."""
    lines = text.splitlines()
    if not lines:
        raise ValueError(f"{where}: empty, expected a header line ({'|'.join(FIELDS)})")
    header = lines[0].split("|")
    missing = [field for field in FIELDS if field not in header]
    if missing:
        raise ValueError(f"{where}:1: the header lacks {', '.join(missing)} (dump with: {DUMP_COMMAND})")
    jobs: list[FinishedJob] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        values = line.split("|")
        if len(values) != len(header):
            raise ValueError(f"{where}:{number}: {len(values)} fields, the header has {len(header)}")
        try:
            job = _finished(dict(zip(header, values, strict=True)))
        except ValueError as error:
            raise ValueError(f"{where}:{number}: {error}") from None
        if job is not None:
            jobs.append(job)
    return jobs


def _finished(row: dict[str, str]) -> FinishedJob | None:
    job_id = row["JobID"]
    if "." in job_id or row["End"] in ("", "Unknown", "None"):
        return None  # a step, or a job still running
    array_job, _, task = job_id.partition("_")
    tres = parse_tres(row.get("AllocTRES", ""))
    typed = sum(int(value) for key, value in tres.items() if key.startswith("gres/gpu:"))
    gpus = int(tres["gres/gpu"]) if "gres/gpu" in tres else typed
    exit_code = row.get("ExitCode", "0:0").split(":", 1)[0]
    limit = row["Timelimit"]
    return FinishedJob(
        job_id=int(row.get("JobIDRaw") or array_job),
        array_job_id=int(array_job) if task else None,
        array_task_id=int(task) if task.isdigit() else None,
        name=row["JobName"],
        user=row["User"],
        partition=row["Partition"],
        state=row["State"].split()[0],
        submit_time=_time(row["Submit"]),
        start_time=None if row["Start"] in ("", "Unknown", "None") else _time(row["Start"]),
        end_time=_time(row["End"]),
        elapsed=parse_duration(row["Elapsed"]) or timedelta(0),
        time_limit=None if limit == "Partition_Limit" else parse_duration(limit),
        node_count=int(row.get("NNodes") or 0),
        alloc_tres=tres,
        gpus=gpus,
        exit_code=int(exit_code) if exit_code.isdigit() else 0,
    )


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)
