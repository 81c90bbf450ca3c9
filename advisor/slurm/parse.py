"""Pure parsers for Slurm command output: text in, models out, no I/O and no clock.

Everything here raises ``ValueError`` (pydantic's ``ValidationError`` is one) on input it does not
understand, so the client can wrap one exception type with the command that produced the text.
Field shapes differ between Slurm releases (22.05 prints plain numbers and strings, 23.x wraps numbers in
``{"set", "infinite", "number"}`` and states in lists); the private helpers absorb those differences.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, TypeVar

from advisor.slurm.models import (
    Access,
    Association,
    FinishedJob,
    Gpus,
    Node,
    Partition,
    QueuedJob,
    Record,
    SubmitResult,
    TestOnlyResult,
)
from advisor.slurm.values import UNSET_WORDS, parse_duration, parse_gres, parse_tres

# Slurm's NO_VAL (0xfffffffe) and INFINITE (0xffffffff); anything at or above means "no value".
_NO_VAL = 0xFFFFFFFE
# A key starts a record or follows whitespace; "cpu=32" inside "TRES=cpu=32,mem=1G" follows "=" or ",".
_SCONTROL_KEY = re.compile(r"(?:^|\s)([A-Za-z][\w:/.]*)=")
_SCONTROL_EMPTY = re.compile(r"No \w+ in the system")
_SUBMITTED = re.compile(r"Submitted batch job (\d+)(?: on cluster (\S+))?")
_PARSABLE = re.compile(r"(\d+)(?:;(\S+))?")
_TEST_ONLY = re.compile(
    r"Job (\d+) to start at (\S+) using (\d+) processors? on nodes? (\S+) in partition (\S+)"
)
_T = TypeVar("_T")


def parse_scontrol_records(text: str) -> list[Record]:
    """Parse ``scontrol show -o`` output: one record per line, values may contain spaces."""
    records: list[Record] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or _SCONTROL_EMPTY.fullmatch(stripped):
            continue
        keys = list(_SCONTROL_KEY.finditer(stripped))
        if not keys or keys[0].start() != 0:
            raise ValueError(f"not a Key=Value record: {stripped[:120]!r}")
        ends = [key.start() for key in keys[1:]] + [len(stripped)]
        records.append(
            {key[1]: stripped[key.end() : end].strip() for key, end in zip(keys, ends, strict=True)}
        )
    return records


def parse_owner(text: str) -> int | None:
    """``squeue --noheader --format=%U`` for one job: its owner's uid, or None for no such job.

    An array job's tasks, once started, are listed a line each, all with the array's one owner."""
    owners = set(text.split())
    if not owners:
        return None
    owner = owners.pop()
    if owners or not owner.isdigit():
        raise ValueError(f"not one uid: {text[:120]!r}")
    return int(owner)


def parse_sinfo_json(text: str) -> list[Node]:
    return [_checked(_node, record, "sinfo node") for record in _json_list(text, "nodes", "sinfo")]


def parse_squeue_json(text: str) -> list[QueuedJob]:
    return [_checked(_queued_job, record, "squeue job") for record in _json_list(text, "jobs", "squeue")]


def parse_sacct_json(text: str) -> list[FinishedJob]:
    """Jobs that have ended; still-running ones have no end time and are left out.

    Steps are nested under each job in the JSON, so the top-level list already holds allocations only.
    """
    jobs: list[FinishedJob] = []
    for record in _json_list(text, "jobs", "sacct"):
        job = _checked(_finished_job, record, "sacct job")
        if job is not None:
            jobs.append(job)
    return jobs


def parse_submit(stdout: str, parsable: bool) -> SubmitResult:
    if parsable:
        lines = [line.strip() for line in stdout.splitlines() if line.strip()]
        match = _PARSABLE.fullmatch(lines[-1]) if lines else None
    else:
        match = _SUBMITTED.search(stdout)
    if match is None:
        raise ValueError(f"no job id in sbatch output: {stdout.strip()[:200]!r}")
    return SubmitResult(job_id=int(match[1]), cluster=match[2])


def parse_test_only(stderr: str, local_tz: tzinfo = UTC) -> TestOnlyResult:
    """Parse ``sbatch --test-only``; a start time without offset is read in ``local_tz``.

    sbatch prints its own local time (or an epoch under ``SLURM_TIME_FORMAT=%s``), which is why the
    client runs it with ``TZ=UTC``.
    """
    match = _TEST_ONLY.search(stderr)
    if match is None:
        raise ValueError(f"no start estimate in sbatch --test-only output: {stderr.strip()[:200]!r}")
    when = match[2]
    if when.isdigit():
        start = datetime.fromtimestamp(int(when), UTC)
    else:
        parsed = datetime.fromisoformat(when)
        start = (parsed if parsed.tzinfo else parsed.replace(tzinfo=local_tz)).astimezone(UTC)
    return TestOnlyResult(
        job_id=int(match[1]), start_time=start, processors=int(match[3]), nodes=match[4], partition=match[5]
    )


def build_partitions(records: Iterable[Mapping[str, str]], nodes: Sequence[Node]) -> list[Partition]:
    """Join ``scontrol show partition`` records with sinfo nodes (sinfo --json has no partition data)."""
    partitions: list[Partition] = []
    for record in records:
        if "PartitionName" not in record:
            raise ValueError(f"partition record has no PartitionName: {dict(record)!r}")
        name = record["PartitionName"]
        members = [node for node in nodes if name in node.partitions]
        gpu_types = {node.gpus.type for node in members if node.gpus and node.gpus.type}
        total_cpus = record.get("TotalCPUs")
        partitions.append(
            Partition(
                name=name,
                state=record.get("State", "UNKNOWN"),
                is_default=record.get("Default", "NO").upper() == "YES",
                node_names=[node.name for node in members],
                total_cpus=int(total_cpus) if total_cpus else sum(node.cpus for node in members),
                max_time=parse_duration(record.get("MaxTime", "UNLIMITED")),
                default_time=parse_duration(record.get("DefaultTime", "NONE")),
                gpu_type=gpu_types.pop() if len(gpu_types) == 1 else None,
                gpus_per_node=max((node.gpus.count for node in members if node.gpus), default=0),
                cpus_per_node=max((node.cpus for node in members), default=0),
                memory_per_node_mb=max((node.memory_mb for node in members), default=0),
                nodes=members,
                access=_access(record),
            )
        )
    return partitions


def _json_list(text: str, key: str, command: str) -> list[dict[str, Any]]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{command} output is not JSON ({error}): {text.strip()[:200]!r}") from None
    reported = document.get("errors") if isinstance(document, dict) else None
    if reported and all(_error_text(error).startswith("Nothing found") for error in reported):
        reported = None  # sacct's way of saying "no such jobs": an empty answer, not a failure
    if reported:
        # 22.05 exits 0 with an "errors" list when it cannot reach slurmctld: an answer that isn't one.
        raise ValueError(f"{command} reported errors: {'; '.join(_error_text(e) for e in reported)}")
    if not isinstance(document, dict) or not isinstance(document.get(key), list):
        errors = document.get("errors") if isinstance(document, dict) else None
        raise ValueError(f"{command} JSON has no {key!r} list; errors: {errors!r}")
    items: list[dict[str, Any]] = document[key]
    if not all(isinstance(item, dict) for item in items):
        raise ValueError(f"{command} JSON {key!r} list holds non-objects")
    return items


def _error_text(error: object) -> str:
    if not isinstance(error, dict):
        return str(error)
    parts = [str(error[key]) for key in ("description", "error") if error.get(key)]
    return " - ".join(dict.fromkeys(parts)) or json.dumps(error)


def _checked(convert: Callable[[dict[str, Any]], _T], record: dict[str, Any], what: str) -> _T:
    """Turn the TypeErrors and KeyErrors of oddly shaped JSON into the ValueError callers expect."""
    try:
        return convert(record)
    except (TypeError, KeyError, AttributeError) as error:
        raise ValueError(f"unexpected {what} record ({error!r}): {str(record)[:200]}") from None


def _need(record: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in record:
        raise ValueError(f"{what} record has no {key!r}: {str(dict(record))[:200]}")
    return record[key]


def _number(value: Any) -> int | None:
    """An integer, or None for null, NO_VAL, INFINITE and 23.x's ``{"set": false}``."""
    if isinstance(value, dict):
        if value.get("infinite") or not value.get("set", True):
            return None
        value = value.get("number")
    if value is None or (isinstance(value, str) and value.strip().upper() in UNSET_WORDS):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"not a number: {value!r}")
    number = int(value)
    return None if number >= _NO_VAL else number


def _count(record: Mapping[str, Any], key: str, what: str) -> int:
    number = _number(_need(record, key, what))
    return 0 if number is None else number


def _epoch(value: Any) -> datetime | None:
    """Slurm uses 0 (and NO_VAL) for "no time"."""
    number = _number(value)
    return datetime.fromtimestamp(number, UTC) if number else None


def _required_epoch(record: Mapping[str, Any], key: str, what: str) -> datetime:
    when = _epoch(_need(record, key, what))
    if when is None:
        raise ValueError(f"{what} record has no {key!r} time: {str(dict(record))[:200]}")
    return when


def _minutes(value: Any) -> timedelta | None:
    number = _number(value)
    return None if number is None else timedelta(minutes=number)


def _optional_id(value: Any) -> int | None:
    """Array ids: 0 and null both mean "not an array job"."""
    return _number(value) or None


def _state(value: Any) -> tuple[str, list[str]]:
    """A base state and its flags, from ``"idle"`` (22.05) or ``["IDLE", "DRAIN"]`` (23.x)."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(name, str) for name in names):
        raise ValueError(f"not a Slurm state: {value!r}")
    return names[0].upper(), [name.upper() for name in names[1:]]


def _tres_gpus(tres: Mapping[str, str]) -> Gpus | None:
    """GPUs in accounting TRES: ``gres/gpu=2`` and/or ``gres/gpu:a100=2``."""
    typed = {key.split(":", 1)[1]: int(value) for key, value in tres.items() if key.startswith("gres/gpu:")}
    if "gres/gpu" not in tres and not typed:
        return None
    count = int(tres["gres/gpu"]) if "gres/gpu" in tres else sum(typed.values())
    return Gpus(type=next(iter(typed)) if len(typed) == 1 else None, count=count)


def _node(record: Mapping[str, Any]) -> Node:
    state, flags = _state(_need(record, "state", "node"))
    gpus_used = parse_gres(record.get("gres_used") or "")
    return Node(
        name=_need(record, "name", "node"),
        state=state,
        flags=flags + [flag.upper() for flag in record.get("state_flags") or []],
        partitions=record.get("partitions") or [],
        cpus=_count(record, "cpus", "node"),
        alloc_cpus=_number(record.get("alloc_cpus")) or 0,
        memory_mb=_count(record, "real_memory", "node"),
        alloc_memory_mb=_number(record.get("alloc_memory")) or 0,
        gpus=parse_gres(record.get("gres") or ""),
        gpus_used=gpus_used.count if gpus_used else 0,
        features=tuple(_names(record.get("active_features") or record.get("features") or "")),
    )


def _names(value: Any) -> list[str]:
    """A comma-separated list (or, in newer versions' JSON, a list) of names."""
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def _access(record: Mapping[str, str]) -> Access:
    def names(key: str, everyone: str | None) -> list[str] | None:
        value = record.get(key)
        return None if value is None or value in ("", everyone, "(null)") else _names(value)

    return Access(
        allow_accounts=names("AllowAccounts", "ALL"),
        deny_accounts=names("DenyAccounts", None),
        allow_groups=names("AllowGroups", "ALL"),
        allow_qos=names("AllowQos", "ALL"),
        deny_qos=names("DenyQos", None),
    )


def parse_associations(text: str) -> list[Association]:
    """``sacctmgr --noheader --parsable2 show assoc ... format=Account,Partition,QOS,DefQOS``."""
    associations = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) < 4:
            raise ValueError(f"an association line needs account|partition|qos|default qos, not {line!r}")
        account, partition, qos, default_qos = (field.strip() for field in fields[:4])
        associations.append(
            Association(
                account=account,
                partition=partition or None,
                qos=_names(qos),
                default_qos=default_qos or None,
            )
        )
    return associations


def _queued_job(record: Mapping[str, Any]) -> QueuedJob:
    node_count = _number(record.get("node_count")) or 0
    tasks = _number(record.get("tasks")) or 1
    gpus = _first_gpus(
        [
            _tres_gpus(parse_tres(record.get("tres_alloc_str") or "")),
            _tres_gpus(parse_tres(record.get("tres_req_str") or "")),
            _scaled(parse_gres(record.get("tres_per_job") or ""), 1),
            _scaled(parse_gres(record.get("tres_per_node") or ""), max(node_count, 1)),
            _scaled(parse_gres(record.get("tres_per_task") or ""), tasks),
            parse_gres(",".join(record.get("gres_detail") or [])),
        ]
    )
    user_id = _count(record, "user_id", "job")
    return QueuedJob(
        job_id=_count(record, "job_id", "job"),
        array_job_id=_optional_id(record.get("array_job_id")),
        array_task_id=_number(record.get("array_task_id")),
        name=record.get("name") or "",
        user=record.get("user_name") or str(user_id),
        uid=user_id,
        partition=record.get("partition") or "",
        state=_state(_need(record, "job_state", "job"))[0],
        reason=record.get("state_reason") or "",
        submit_time=_required_epoch(record, "submit_time", "job"),
        start_time=_epoch(record.get("start_time")),
        end_time=_epoch(record.get("end_time")),
        time_limit=_minutes(record.get("time_limit")),
        node_count=node_count,
        cpus=_number(record.get("cpus")) or 0,
        gpus=gpus.count,
        gpu_type=gpus.type,
        tres_requested=parse_tres(record.get("tres_req_str") or ""),
        node_list=record.get("nodes") or "",
    )


def _scaled(gpus: Gpus | None, factor: int) -> Gpus | None:
    return None if gpus is None else Gpus(type=gpus.type, count=gpus.count * factor)


def _first_gpus(candidates: Sequence[Gpus | None]) -> Gpus:
    """The count from the most authoritative source that has one, and a type from any source that has it."""
    found = [gpus for gpus in candidates if gpus is not None]
    if not found:
        return Gpus(type=None, count=0)
    return Gpus(type=next((gpus.type for gpus in found if gpus.type), None), count=found[0].count)


def _finished_job(record: Mapping[str, Any]) -> FinishedJob | None:
    times = _need(record, "time", "sacct job")
    end = _epoch(times.get("end"))
    if end is None:
        return None
    state = _need(record, "state", "sacct job")
    alloc_tres = {
        f"{item['type']}/{item['name']}" if item.get("name") else str(item["type"]): str(
            _number(item["count"])
        )
        for item in (record.get("tres") or {}).get("allocated") or []
        if _number(item.get("count")) is not None
    }
    gpus = _tres_gpus(alloc_tres)
    array = record.get("array") or {}
    return FinishedJob(
        job_id=_count(record, "job_id", "sacct job"),
        array_job_id=_optional_id(array.get("job_id")),
        array_task_id=_number(array.get("task_id")),
        name=record.get("name") or "",
        user=record.get("user") or "",
        partition=record.get("partition") or "",
        state=_state(state.get("current") if isinstance(state, dict) else state)[0],
        submit_time=_required_epoch(times, "submission", "sacct job time"),
        start_time=_epoch(times.get("start")),
        end_time=end,
        elapsed=timedelta(seconds=_number(times.get("elapsed")) or 0),
        time_limit=_minutes(times.get("limit")),
        node_count=_number(record.get("allocation_nodes")) or 0,
        alloc_tres=alloc_tres,
        gpus=gpus.count if gpus else 0,
        exit_code=_number((record.get("exit_code") or {}).get("return_code")) or 0,
    )
