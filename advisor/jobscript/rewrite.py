"""Applying advice to a submission without changing what the user's job means.

Advice becomes extra sbatch command-line options (they win over the script's own), exported
`ADVISOR_*` variables, and, where the job declares a batch flag, that flag's value in a copy of the
script sent on stdin. The user's file is never edited. Every value is validated before it is placed,
so nothing the advice carries can become a second directive or a shell command.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from datetime import timedelta
from pathlib import PurePath
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from advisor import contract
from advisor.jobscript.advisor_lines import JobDescription
from advisor.jobscript.lexer import body_start
from advisor.jobscript.options import parse_options
from advisor.jobscript.request import GpuRequest, JobRequest
from advisor.precision import Amp
from advisor.slurm.values import format_duration

_GPU_TYPE = re.compile(r"^[A-Za-z0-9_.-]+$")


class AdviceError(ValueError):
    """Advice that cannot be applied safely; the caller then submits the job unchanged."""


class Advice(BaseModel):
    """What the recommender decided; None leaves that aspect as the user asked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    partition: str | None = None
    other_partitions: list[str] = []
    """After ``partition``, where the job may also start (the user's own list, reordered, not shrunk)."""
    gpus: Annotated[int, Field(ge=1)] | None = None
    """In the unit of the user's own GPU request (per job, node or task)."""
    nodes: Annotated[int, Field(ge=1)] | None = None
    tasks_per_node: Annotated[int, Field(ge=1)] | None = None
    """Where the job runs one task per GPU (``--ntasks-per-node``), the tasks follow the GPUs."""
    gpu_type: str | None = None
    time_limit: timedelta | None = None
    global_batch: Annotated[int, Field(ge=1)] | None = None
    """Only under a policy that lets the global batch move within the user's declared range."""
    micro_batch: Annotated[int, Field(ge=1)] | None = None
    grad_accum: Annotated[int, Field(ge=1)] | None = None
    amp: Amp | None = None
    channels_last: bool | None = None


class Submission(BaseModel):
    """Exactly what goes to sbatch: its arguments, the script on stdin (or None), extra environment."""

    model_config = ConfigDict(frozen=True)

    argv: list[str]
    stdin: str | None = None
    env: dict[str, str] = {}
    rewritten: bool = False
    notes: list[str] = []


def unchanged(argv: Sequence[str], stdin: str | None = None, note: str | None = None) -> Submission:
    """The job as the user gave it: the fail-open path."""
    return Submission(argv=list(argv), stdin=stdin, notes=[note] if note else [])


def apply_advice(
    request: JobRequest,
    description: JobDescription | None,
    argv: Sequence[str],
    advice: Advice,
    partitions: Collection[str],
) -> Submission:
    """The submission that follows `advice`; raises AdviceError if any value is unsafe to place."""
    rest = parse_options(argv, "command line")[1]
    user_options, script_and_args = list(argv[: len(argv) - len(rest)]), list(rest)
    stdin = None if script_and_args else request.script
    if request.het_components > 1 or request.foreign_directives:
        kinds = ["hetjob"] if request.het_components > 1 else request.foreign_directives
        return unchanged(argv, stdin, f"advised only: scripts with {', '.join(kinds)} are never rewritten")
    options = advice_options(request, advice, partitions)
    env = advice_environment(description, advice)
    notes: list[str] = []
    substituted = _substitute_batch_flag(request, description, advice, notes)
    if substituted is not None and request.script_args:
        notes.append("batch flag left as written: the script takes arguments, so it must stay a file")
    elif substituted is not None:
        if script_and_args and "job-name" not in request.options:
            # On stdin the job would be named "sbatch"; keep the name the file gave it.
            options.append(f"--job-name={PurePath(script_and_args[0]).name}")
        stdin, script_and_args = substituted, []
    export = _export_option(request, env)
    return Submission(
        argv=[*user_options, *options, *export, *script_and_args],
        stdin=stdin,
        env={} if export else env,
        rewritten=bool(options or export or env),
        notes=notes,
    )


def advice_options(request: JobRequest, advice: Advice, partitions: Collection[str]) -> list[str]:
    """The sbatch options that put `advice` in force over what the script and command line say."""
    options: list[str] = []
    if advice.partition is not None:
        names = [advice.partition, *advice.other_partitions]
        for name in names:
            if name not in partitions:
                raise AdviceError(f"partition {name!r} is not one of the cluster's")
        options.append(f"--partition={','.join(names)}")
    if advice.gpu_type is not None and not _GPU_TYPE.match(advice.gpu_type):
        raise AdviceError(f"GPU type {advice.gpu_type!r} is not a gres type name")
    if advice.gpus is not None or advice.gpu_type is not None:
        if request.gpus is None:
            raise AdviceError("the job asks for no GPUs; the advisor never adds them")
        count = advice.gpus if advice.gpus is not None else request.gpus.count
        gpu_type = advice.gpu_type if advice.gpu_type is not None else request.gpus.type
        options.append(gpu_option(request.gpus, count, gpu_type, request.options.get("gres")))
    if advice.nodes is not None:
        options.append(f"--nodes={advice.nodes}")
    if advice.tasks_per_node is not None:
        options.append(f"--ntasks-per-node={advice.tasks_per_node}")
    if advice.time_limit is not None:
        if advice.time_limit <= timedelta(0):
            raise AdviceError("a time limit must be positive")
        options.append(f"--time={format_duration(advice.time_limit)}")
    return options


def gpu_option(current: GpuRequest, count: int, gpu_type: str | None, gres: str | None) -> str:
    """The GPU request in the user's own form, so it replaces theirs rather than adding a second one."""
    typed = f"{gpu_type}:{count}" if gpu_type else str(count)
    if current.option == "gres":
        others = [item for item in (gres or "").split(",") if item and not _is_gpu_gres(item)]
        return f"--gres={','.join([f'gpu:{typed}', *others])}"
    return f"--{current.option}={typed}"


def _is_gpu_gres(item: str) -> bool:
    name = item.removeprefix("gres:").removeprefix("gres/")
    return name == "gpu" or name.startswith(("gpu:", "gpu="))


def advice_environment(description: JobDescription | None, advice: Advice) -> dict[str, str]:
    """The ``ADVISOR_*`` variables that tell the training script the advice (`advisor.runtime` reads them);
    without the description, the global batch only where the advice moves it."""
    env: dict[str, str] = {}
    if advice.micro_batch is not None:
        env[contract.MICRO_BATCH] = str(advice.micro_batch)
    if advice.grad_accum is not None:
        env[contract.GRAD_ACCUM] = str(advice.grad_accum)
    if advice.global_batch is not None:
        env[contract.GLOBAL_BATCH] = str(advice.global_batch)
    elif description is not None and (advice.micro_batch is not None or advice.grad_accum is not None):
        env[contract.GLOBAL_BATCH] = str(description.global_batch)
    if advice.amp is not None:
        env[contract.AMP] = advice.amp
    if advice.channels_last is not None:
        env[contract.CHANNELS_LAST] = "1" if advice.channels_last else "0"
    return env


def _export_option(request: JobRequest, env: dict[str, str]) -> list[str]:
    """sbatch exports its whole environment unless --export says otherwise; then name ours in it."""
    export = request.export
    if not env or export is None or export.split(",")[0].upper() == "ALL":
        return []
    ours = [f"{name}={value}" for name, value in env.items()]
    kept = [] if export.upper() == "NONE" else [export]
    return [f"--export={','.join([*kept, *ours])}"]


def _substitute_batch_flag(
    request: JobRequest, description: JobDescription | None, advice: Advice, notes: list[str]
) -> str | None:
    """The script with the batch flag's literal value set to the micro-batch; None when not possible."""
    if description is None or description.batch_flag is None or advice.micro_batch is None:
        return None
    script = request.script
    start = body_start(script)
    pattern = contract.batch_flag_pattern(description.batch_flag)
    matches = list(pattern.finditer(script, start))
    if not matches:
        notes.append(f"{description.batch_flag} not found in the script body; the job gets the environment")
        return None
    literal = [m for m in matches if re.fullmatch(r"\d+", m.group(1).strip("'\""))]
    if len(literal) != len(matches):
        notes.append(f"{description.batch_flag} has a non-literal value; the job gets the environment")
        return None
    pieces, last = [], 0
    for match in literal:
        begin, end = match.span(1)
        value = match.group(1)
        quote = value[0] if value[0] in "'\"" else ""
        pieces += [script[last:begin], f"{quote}{advice.micro_batch}{quote}"]
        last = end
    notes.append(f"{description.batch_flag} set to {advice.micro_batch} in the script sent to sbatch")
    return "".join([*pieces, script[last:]])
