"""``sacct --parsable2`` dumps (``sacct -P -a -X -o FIELDS``), the text form an admin already has, read into
the same `FinishedJob` records as ``sacct --json``. Times are read as UTC: dump with ``TZ=UTC``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
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
            job = _finished(SacctLine.of(dict(zip(header, values, strict=True))))
        except ValueError as error:
            raise ValueError(f"{where}:{number}: {error}") from None
        if job is not None:
            jobs.append(job)
    return jobs


@dataclass(frozen=True)
class SacctLine:
    """One line of a dump, field by field, as text; an optional field the dump lacks is empty."""

    job_id: str
    user: str
    job_name: str
    partition: str
    state: str
    submit: str
    start: str
    end: str
    elapsed: str
    time_limit: str
    job_id_raw: str = ""
    nodes: str = ""
    alloc_tres: str = ""
    exit_code: str = "0:0"

    @classmethod
    def of(cls, fields: dict[str, str]) -> SacctLine:
        """The line whose fields ``fields`` names by the dump's header."""
        present = {name: fields[header] for name, header in _HEADERS.items() if header in fields}
        return cls(**present)


_HEADERS = dict(zip([field.name for field in dataclasses.fields(SacctLine)], DUMP_FIELDS, strict=True))
"""Each field's name in the dump's header."""


def _finished(line: SacctLine) -> FinishedJob | None:
    if "." in line.job_id or line.end in _NO_TIME:
        return None  # a step, or a job still running
    array_job, _, task = line.job_id.partition("_")
    tres = parse_tres(line.alloc_tres)
    typed = sum(int(value) for key, value in tres.items() if key.startswith("gres/gpu:"))
    gpus = int(tres["gres/gpu"]) if "gres/gpu" in tres else typed
    exit_code = line.exit_code.split(":", 1)[0]
    limit = line.time_limit
    return FinishedJob(
        job_id=int(line.job_id_raw or array_job),
        array_job_id=int(array_job) if task else None,
        array_task_id=int(task) if task.isdigit() else None,
        name=line.job_name,
        user=line.user,
        partition=line.partition,
        state=line.state.split()[0],
        submit_time=_time(line.submit),
        start_time=None if line.start in _NO_TIME else _time(line.start),
        end_time=_time(line.end),
        elapsed=parse_duration(line.elapsed) or timedelta(0),
        time_limit=None if limit == "Partition_Limit" else parse_duration(limit),
        node_count=int(line.nodes or 0),
        alloc_tres=tres,
        gpus=gpus,
        exit_code=int(exit_code) if exit_code.isdigit() else 0,
    )


_NO_TIME = ("", "Unknown", "None")


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)
