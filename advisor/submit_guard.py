"""The daemon's submission, checked as untrusted input before `advise-submit` hands it to sbatch.

A rewrite (`advisor.jobscript.rewrite.apply_advice`) may only add a few options between the user's own
options and the script, set `ADVISOR_*` variables (or name them in ``--export``), and put the script on
stdin with the batch flag's literal value replaced. That is all this accepts: anything else is a broken or
hostile daemon, and the job goes to sbatch unchanged. The user's own argv, script and environment are
the wrapper's copies, never the daemon's. Standard library only: every submission runs through this.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePath
from types import MappingProxyType
from typing import Any, NamedTuple

from advisor import contract
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import SBATCH_PREFIXES, body_start, read_directives
from advisor.jobscript.options import (
    command_line_segments,
    options_from_environment,
    parse_options,
    script_arguments,
)

_NAME = r"[A-Za-z0-9_.-]{1,64}"
_PARTITIONS = re.compile(rf"{_NAME}(?:,{_NAME})*")
_TIME = re.compile(r"(?:[1-9][0-9]{0,4}-)?[0-9]{2}:[0-5][0-9]:[0-5][0-9]")
_COUNT = r"[1-9][0-9]{0,5}"
_GPU_LIST = re.compile(rf"(?:{_NAME}:)?{_COUNT}")
_GPU_GRES = re.compile(rf"gpu(?::{_NAME})?:{_COUNT}")
_GPU_LIST_OPTIONS = ("gpus", "gpus-per-node", "gpus-per-task", "gpus-per-socket")
_VALUE = re.compile(r"(['\"]?)([0-9]+)\1")


class UntrustedAdvice(ValueError):
    """The daemon's submission does something a rewrite may not; the job goes to sbatch unchanged."""


class SbatchCall(NamedTuple):
    """Exactly what the wrapper runs: sbatch's arguments, the script on stdin (or None), extra variables.
    (NamedTuples, not dataclasses, which load `inspect`: about 7 ms of every sbatch's cli_filter helper.)"""

    argv: list[str]
    stdin: str | None = None
    env: Mapping[str, str] = MappingProxyType({})
    rewritten: bool = False


class UserJob(NamedTuple):
    """The job as the user gave it: the wrapper's own copies, which the daemon's answer is checked against."""

    argv: list[str]
    """sbatch's arguments: options, then the script's path and its arguments (none: the script is stdin)."""
    script: str
    where: str
    environ: Mapping[str, str]
    """The user's ``SBATCH_*`` variables, which sbatch reads as options."""
    batch_flag: str | None = None
    wrap: bool = False
    """The script is sbatch's ``--wrap`` command (``#!/bin/sh`` and the command): it stays in the argv,
    never goes on stdin, and only options are added to it."""

    @property
    def operands(self) -> list[str]:
        return script_arguments(self.argv)

    @property
    def hetjob(self) -> bool:
        """Several components (``:`` on the command line, ``#SBATCH hetjob`` in the script): never rewritten,
        since a change meant for one job would land on one component of it."""
        try:
            if len(command_line_segments(self.argv)[0]) > 1:
                return True
            return any(d.separator for d in read_directives(self.script, SBATCH_PREFIXES, self.where))
        except ScriptError:  # sbatch refuses the job; no rewrite is checked against it
            return False

    def unchanged(self) -> SbatchCall:
        return SbatchCall(argv=list(self.argv), stdin=None if self.operands or self.wrap else self.script)


def checked(job: UserJob, data: Any) -> SbatchCall:
    """The daemon's ``submission`` if it only does what a rewrite may; raises UntrustedAdvice otherwise."""
    if not isinstance(data, dict):
        raise UntrustedAdvice("the submission is not an object")
    argv, stdin, env = data.get("argv"), data.get("stdin"), data.get("env", {})
    if not (isinstance(argv, list) and all(isinstance(word, str) for word in argv)):
        raise UntrustedAdvice("submission.argv is not a list of strings")
    if not (stdin is None or isinstance(stdin, str)):
        raise UntrustedAdvice("submission.stdin is not a string")
    if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise UntrustedAdvice("submission.env is not a map of strings")
    if data.get("rewritten") is not True:
        return job.unchanged()
    if job.hetjob:
        raise UntrustedAdvice("a hetjob is never rewritten")
    added, moved = _added_options(job, argv)
    _check_options(job, added, moved, exported=bool(env))
    _check_environment(env)
    _check_stdin(job, stdin, moved)
    return SbatchCall(argv=argv, stdin=None if job.wrap else stdin, env=dict(env), rewritten=True)


def _added_options(job: UserJob, argv: list[str]) -> tuple[list[str], bool]:
    """The words placed between the user's options and the script, and whether the script moved to stdin."""
    operands = job.operands
    own = job.argv[: len(job.argv) - len(operands)]
    if argv[: len(own)] != own:
        raise UntrustedAdvice("the submission does not keep your own sbatch options as they are")
    tail = argv[len(own) :]
    if "--" in own and len(tail) > len(operands):
        raise UntrustedAdvice("options cannot be added after '--'")
    if operands and tail[len(tail) - len(operands) :] == operands:
        return tail[: len(tail) - len(operands)], False
    return tail, bool(operands)


def _check_options(job: UserJob, added: list[str], moved: bool, exported: bool) -> None:
    given = _given_options(job)
    seen: set[str] = set()
    for word in added:
        name, has_value, value = word.partition("=")
        key = name.removeprefix("--")
        if not (name.startswith("--") and has_value) or key in seen:
            raise UntrustedAdvice(f"{word!r} is not an option a rewrite adds")
        seen.add(key)
        check = _CHECKS.get(key)
        if check is None:
            raise UntrustedAdvice(f"{name} is not an option a rewrite may set")
        problem = check(value, given, key)
        if key == "job-name" and not (moved and value == PurePath(job.operands[0]).name):
            problem = "the job keeps its own name unless its script moves to stdin"
        if key == "export" and exported:
            problem = "the submission sets variables both in --export and in the environment"
        if problem:
            raise UntrustedAdvice(f"{name}={value!r}: {problem}")


def _given_options(job: UserJob) -> dict[str, list[str]]:
    """Every value the user gave each option, in sbatch's order: script, environment, command line."""
    try:
        directives = read_directives(job.script, SBATCH_PREFIXES, job.where)
        found = [option for d in directives for option in parse_options(d.args, job.where)[0]]
        found += options_from_environment(job.environ)
        found += parse_options(job.argv, "command line")[0]
    except ScriptError as error:
        raise UntrustedAdvice(f"the job cannot be checked: {error}") from error
    given: dict[str, list[str]] = {}
    for option in found:
        given.setdefault(option.name, []).append(option.value or "")
    return given


def _partition(value: str, _given: dict[str, list[str]], _key: str) -> str | None:
    return None if _PARTITIONS.fullmatch(value) else "not a list of partition names"


def _time(value: str, _given: dict[str, list[str]], _key: str) -> str | None:
    return None if _TIME.fullmatch(value) else "not a time limit [D-]HH:MM:SS"


def _count(value: str, _given: dict[str, list[str]], _key: str) -> str | None:
    return None if value.isdigit() and 0 < int(value) <= 100_000 else "not a positive count"


def _job_name(value: str, _given: dict[str, list[str]], _key: str) -> str | None:
    return None


def _gpu_form(value: str, given: dict[str, list[str]], key: str) -> str | None:
    """A GPU count replaces the user's GPU option in the user's own form; other gres stay as they were."""
    if key not in given:
        return "the job gives its GPUs another way (a rewrite keeps the user's form)"
    if key in _GPU_LIST_OPTIONS:
        return None if _GPU_LIST.fullmatch(value) else "not [TYPE:]COUNT"
    first, *others = value.split(",")
    own = {item for text in given[key] for item in text.split(",")}
    if not _GPU_GRES.fullmatch(first) or not set(others) <= own:
        return "not gpu[:TYPE]:COUNT followed by the job's own other gres"
    return None


def _export(value: str, given: dict[str, list[str]], _key: str) -> str | None:
    """The user's own --export value, with the advice's variables named after it."""
    kept = given.get("export", ["ALL"])[-1]
    prefix = "" if kept.upper() == "NONE" else kept + ","
    if not value.startswith(prefix):
        return "the submission does not keep the job's own --export"
    for item in value[len(prefix) :].split(","):
        name, _, setting = item.partition("=")
        if not contract.valid_value(name, setting):
            return f"{item!r} is not a variable of the advisor's contract with a value it may take"
    return None


_CHECKS: dict[str, Callable[[str, dict[str, list[str]], str], str | None]] = {
    "partition": _partition,
    "time": _time,
    "job-name": _job_name,
    "nodes": _count,
    "ntasks-per-node": _count,
    "gres": _gpu_form,
    "export": _export,
    **{name: _gpu_form for name in _GPU_LIST_OPTIONS},
}


def _check_environment(env: Mapping[str, str]) -> None:
    for name, value in env.items():
        if not contract.valid_value(name, value):
            raise UntrustedAdvice(f"{name}={value!r} is not a variable of the advisor's contract")


def _check_stdin(job: UserJob, stdin: str | None, moved: bool) -> None:
    """stdin is the user's script, or, where the job declares a batch flag, the script with that flag's
    literal values replaced by other counts and nothing else changed. A ``--wrap`` command is the script
    itself, kept as written."""
    if job.wrap:
        if stdin not in (None, job.script):
            raise UntrustedAdvice("a --wrap command keeps its own batch size: put it in a script for that")
        return
    if stdin is None:
        if moved or not job.operands:
            raise UntrustedAdvice("the submission has no script")
        return
    if job.operands and not moved:
        raise UntrustedAdvice("the submission sends a script on stdin besides the job's own file")
    if stdin != job.script and not _only_batch_values_differ(job, stdin):
        raise UntrustedAdvice("the script sent on stdin is not the job's own")


def _only_batch_values_differ(job: UserJob, stdin: str) -> bool:
    if job.batch_flag is None:
        return False
    pattern = contract.batch_flag_pattern(job.batch_flag)
    start = body_start(job.script)
    if stdin[:start] != job.script[:start]:
        return False
    ours, theirs = _split_values(pattern, job.script, start), _split_values(pattern, stdin, start)
    if len(ours) != len(theirs) or ours[0::2] != theirs[0::2]:
        return False
    return all(_same_form(old, new) for old, new in zip(ours[1::2], theirs[1::2], strict=True))


def _split_values(pattern: re.Pattern[str], text: str, start: int) -> list[str]:
    """The text around each value of the batch flag, and the values, alternating."""
    pieces, last = [], 0
    for match in pattern.finditer(text, start):
        pieces += [text[last : match.start(1)], match.group(1)]
        last = match.end(1)
    return [*pieces, text[last:]]


def _same_form(old: str, new: str) -> bool:
    """A literal count replaced by another count in the same quotes."""
    before, after = _VALUE.fullmatch(old), _VALUE.fullmatch(new)
    if before is None or after is None or before[1] != after[1]:
        return False
    return contract.valid_value(contract.MICRO_BATCH, after[2])


def added_words(before: Sequence[str], after: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """What a rewrite adds to the user's sbatch command line and environment, as the user would type it."""
    kept = set(before)
    return [word for word in after if word not in kept] + [f"{name}={value}" for name, value in env.items()]


def sanitized(text: str, limit: int = 300) -> str:
    """The daemon's words as one printable line: no escape sequences or line breaks reach a terminal."""
    clean = "".join(char if char.isprintable() else "?" for char in text)
    return clean if len(clean) <= limit else clean[:limit] + "..."
