"""The daemon asked about a job as a submission asks: by `advise-submit` and by the cli_filter's helper, which
runs in every plain sbatch. Standard library only, and only what asking needs: the factory child's module
loads where a factory is run (advise-submit), never in the helper (`tests/test_cli_filter_imports.py`).

The daemon's answer is untrusted input: `advisor.submit_guard` accepts only what a rewrite may do.
"""

from __future__ import annotations

import binascii
import contextlib
import json
import os
import pwd
import re
from typing import Any, NamedTuple

from advisor.daemon.transport import DaemonRefused, DaemonUnreachable, Service, call
from advisor.jobscript.advisor_words import description_values
from advisor.jobscript.errors import ScriptError
from advisor.settings import CallerSettings, SettingsError, caller_settings
from advisor.submit_guard import SbatchCall, UntrustedAdvice, UserJob, checked, sanitized

_NAMES_FILES = re.compile(r"--(config|recipe|deepspeed)|\.(ya?ml|json)\b")
"""A script whose training command may name a file to read (`advisor.jobscript.recipes`); decided on the
standard library alone, as this runs before every submission."""
WRAP = "--wrap"
"""A ``--wrap`` command's place in messages; its script is sbatch's own: ``#!/bin/sh`` and the command."""


class AdvisorUnavailable(RuntimeError):
    """Anything that keeps the advice from arriving; the job then goes to sbatch unchanged. ``status``: the
    daemon's HTTP status where it answered with an error."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Answer(NamedTuple):
    """The daemon's answer: the request id to report the job under, the checked submission, the whole body."""

    request_id: str
    submission: SbatchCall
    body: dict[str, Any]
    files_refused: str | None = None
    """Why the daemon took the job without the files its command names (over its caps), if it did."""


def batch_flag(text: str, where: str, description_args: list[str]) -> str | None:
    """The job's ``--batch-flag``, if its description reads and names one."""
    try:
        flag = description_values(text, where, description_args)[0].get("batch_flag")
    except ScriptError:
        return None
    return flag if isinstance(flag, str) else None


def advise(
    job: UserJob, script: bytes, description_args: list[str], *, run_factory: bool, preview: bool = False
) -> Answer:
    """``run_factory``: whether this process may import and call the factory the job names, to send its
    layer table; only a command the user started says yes (advise-submit), never the cli_filter, which
    may run inside anyone's sbatch, root's included. ``preview``: a dry run, which the daemon answers
    without auditing (nothing will be submitted)."""
    request = {
        "script_b64": binascii.b2a_base64(script, newline=False).decode("ascii"),
        "where": job.where,
        "sbatch_argv": job.argv,
        "description_args": description_args,
        "environ": dict(job.environ),
        "table": _table(job.script, job.where, description_args) if run_factory else None,
        "files": _files(job, script, description_args) if run_factory else None,
        "preview": preview,
    }
    answer, refused = _asked(request)
    body = json.loads(answer)
    if not isinstance(body, dict) or not isinstance(body.get("request_id"), str):
        raise ValueError("the answer carries no request id")
    return Answer(body["request_id"], checked(job, body.get("submission")), body, refused)


def _files(job: UserJob, script: bytes, description_args: list[str]) -> dict[str, str] | None:
    """The files the training command names, read here as the job will find them (the daemon reads none).
    Only a command the user started reads them, as the user (advise-submit), never the cli_filter."""
    if not _NAMES_FILES.search(job.script):
        return None
    from advisor.jobscript.submission import named_files  # the parser: not the cli_filter's fast path

    return named_files(script, job.where, job.argv, job.environ, description_args)


def _asked(request: dict[str, Any]) -> tuple[bytes, str | None]:
    """The daemon's answer; one that refuses the files (over its caps: the error, returned, names them) is
    asked again without them, so the job is still advised, only less well."""
    try:
        return ask("POST", "/advise", json.dumps(request).encode()), None
    except AdvisorUnavailable as error:
        if not request["files"] or error.status not in (400, 413):
            raise
        refused = sanitized(str(error.__cause__))  # the daemon's own words, without ask's preface
    return ask("POST", "/advise", json.dumps({**request, "files": None}).encode()), refused


def _table(text: str, where: str, description_args: list[str]) -> dict[str, Any] | None:
    from advisor.factory_table import FactoryFailed, factory_table  # where a factory may run: not the filter

    try:
        return factory_table(text, where, description_args)
    except FactoryFailed as error:
        raise AdvisorUnavailable(str(error)) from None


def ask(method: str, path: str, body: bytes | None = None) -> bytes:
    """One request to the daemon the caller's settings name; whatever fails is `AdvisorUnavailable`."""
    try:
        settings = caller_settings(os.environ)
    except SettingsError as error:
        raise AdvisorUnavailable(f"the advisor's settings are unusable: {sanitized(str(error))}") from error
    try:
        service = Service(settings.socket, settings.service, settings.munge_socket)
        return call(service, method, path, body, settings.timeout_s, trusted_uids(settings))
    except DaemonUnreachable as error:
        raise AdvisorUnavailable(sanitized(str(error))) from error
    except DaemonRefused as error:
        why = f"the advisor could not advise this job: {sanitized(str(error))}"
        raise AdvisorUnavailable(why, error.status) from error


def trusted_uids(settings: CallerSettings) -> set[int]:
    """Root, the caller, and the advisor's user: anyone else serving the socket could rewrite the job."""
    trusted = {0, os.getuid()}
    name = settings.daemon_user
    with contextlib.suppress(KeyError):  # no such user here: only root and the caller
        trusted.add(int(name) if name.isdigit() else pwd.getpwnam(name).pw_uid)
    return trusted


def reason(error: Exception) -> str:
    """Why the advice did not arrive, in words (an unexpected error by its type and message)."""
    if isinstance(error, AdvisorUnavailable):
        return str(error)
    if isinstance(error, UntrustedAdvice):
        return sanitized(f"the advice was refused: {error}")
    return sanitized(f"the advisor failed ({type(error).__name__}: {error})")


def kill_warnings(body: dict[str, Any]) -> list[str]:
    """The recommendation's ``kill_warnings`` (`advisor.recommend.kills` words them), each one printable
    line; none from an answer without them."""
    recommendation = body.get("recommendation")
    said = recommendation.get("kill_warnings") if isinstance(recommendation, dict) else None
    return [sanitized(text) for text in said if isinstance(text, str)] if isinstance(said, list) else []
