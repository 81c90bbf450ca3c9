"""`advise-submit [advisor options] [#ADVISOR options] [sbatch options] SCRIPT [args]`: sbatch, advised.

It asks the daemon, shows the advice, then runs sbatch itself, as the user, exactly once: with the
advised changes when the policy applies them (and the user agrees), otherwise unchanged. Whatever goes
wrong on the advisor's side (no daemon, a slow one, an error, a bug here) the job is submitted unchanged
with one warning line. sbatch's own output and exit status are the wrapper's.

Advisor options: ``--dry-run`` (advise and ask Slurm with ``--test-only``, submit nothing), ``--json``
(the advice as JSON on stdout), ``--yes`` (apply without asking on a terminal), ``--no-rewrite`` (submit
unchanged, still advised), ``--explain`` (print the candidates and reasons even off a terminal).
Environment: ``ADVISOR_SOCKET`` (the daemon), ``ADVISOR_TIMEOUT`` (seconds, default 2).

It starts fast because it imports only the standard library on its way to sbatch: it speaks the API of
`advisor.api` as plain JSON (the daemon validates what it receives; this side checks the few fields it uses),
and loads pydantic, rich or torch only to show a table or to introspect a factory model.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from advisor import paths
from advisor.daemon.transport import DaemonRefused, DaemonUnreachable, call
from advisor.jobscript.advisor_words import description_values, names_a_factory, split_command_line
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import STDIN
from advisor.jobscript.options import script_arguments

OURS = ("--dry-run", "--json", "--yes", "--no-rewrite", "--explain")
_SBATCH_ONLY = ("-h", "--help", "--usage", "-V", "--version", "--wrap", "--test-only")
"""sbatch options that print something or build the script themselves: passed straight to sbatch."""
DEFAULT_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Flags:
    dry_run: bool = False
    json: bool = False
    yes: bool = False
    no_rewrite: bool = False
    explain: bool = False


class AdvisorUnavailable(RuntimeError):
    """Anything that keeps the advice from arriving; the job then goes to sbatch unchanged."""


@dataclass(frozen=True)
class Submission:
    """What goes to sbatch: the response's ``submission`` (`advisor.jobscript.rewrite.Submission`), or the
    job as the user gave it."""

    argv: list[str]
    stdin: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    rewritten: bool = False

    @classmethod
    def from_json(cls, data: Any) -> Submission:
        """Refuses anything but the shape sbatch needs: a wrong field is the advisor's failure (fail-open)."""
        argv, stdin, env = data["argv"], data.get("stdin"), data.get("env", {})
        if not (isinstance(argv, list) and all(isinstance(word, str) for word in argv)):
            raise ValueError("submission.argv is not a list of strings")
        if not (stdin is None or isinstance(stdin, str)):
            raise ValueError("submission.stdin is not a string")
        if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
            raise ValueError("submission.env is not a map of strings")
        return cls(argv=argv, stdin=stdin, env=env, rewritten=data.get("rewritten") is True)


@dataclass(frozen=True)
class Advice:
    """The daemon's answer: the request id to report the job under, the submission, and the whole body."""

    request_id: str
    submission: Submission
    body: dict[str, Any]


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    flags, rest = _flags(words)
    description_args, sbatch_argv = split_command_line(rest)
    if any(word.split("=", 1)[0] in _SBATCH_ONLY for word in sbatch_argv):
        return _sbatch(Submission(argv=rest), capture=False).returncode
    try:
        operands = script_arguments(sbatch_argv)
        script = Path(operands[0]).read_bytes() if operands else sys.stdin.buffer.read()
    except (ScriptError, OSError):
        # sbatch says what is wrong with the command line or the file, in its own words.
        return _sbatch(Submission(argv=sbatch_argv), capture=False).returncode
    where = operands[0] if operands else STDIN
    unchanged = Submission(
        argv=sbatch_argv, stdin=None if operands else script.decode("utf-8", "surrogateescape")
    )
    try:
        response = _advise(script, where, sbatch_argv, description_args)
    except Exception as error:  # fail-open: nothing on the advisor's side may cost the user their job
        print(f"advise-submit: warning: {_reason(error)}; submitting unchanged", file=sys.stderr)
        return _finish(unchanged, flags, None)
    _show(response, flags)
    submission = response.submission
    if not submission.rewritten or flags.no_rewrite or not _agreed(flags):
        submission = unchanged
    return _finish(submission, flags, response)


def _flags(words: list[str]) -> tuple[Flags, list[str]]:
    """Advisor options come first, before any #ADVISOR or sbatch option."""
    seen: dict[str, bool] = {}
    index = 0
    while index < len(words) and words[index] in OURS:
        seen[words[index].removeprefix("--").replace("-", "_")] = True
        index += 1
    return Flags(**seen), words[index:]


def _advise(script: bytes, where: str, sbatch_argv: list[str], description_args: list[str]) -> Advice:
    environ = {name: value for name, value in os.environ.items() if name.startswith("SBATCH_")}
    table = _client_side_table(script, where, description_args)
    request = {
        "script_b64": base64.b64encode(script).decode("ascii"),
        "where": where,
        "sbatch_argv": sbatch_argv,
        "description_args": description_args,
        "environ": environ,
        "table": table,
    }
    body = json.loads(_call("POST", "/advise", json.dumps(request).encode()))
    request_id = body["request_id"]
    if not isinstance(request_id, str):
        raise ValueError("request_id is not a string")
    return Advice(request_id=request_id, submission=Submission.from_json(body["submission"]), body=body)


def _client_side_table(script: bytes, where: str, description_args: list[str]) -> dict[str, object] | None:
    """A factory model (``package.module:factory``) is the user's code: only the user's process imports it."""
    text = script.decode("utf-8", "surrogateescape")
    try:
        if not names_a_factory(description_values(text, where, description_args)[0]):
            return None
        from advisor.jobscript.advisor_lines import parse_description

        description = parse_description(text, where, description_args)
    except ScriptError:
        return None  # the daemon reports it, with the place
    assert description is not None
    from advisor.introspect.run import introspect

    table = introspect(
        description.model, description.input_shape, description.model_kwargs, allow_factories=True
    )
    return dict(table.model_dump(mode="json"))


def _call(method: str, path: str, body: bytes | None = None) -> bytes:
    timeout = float(os.environ.get("ADVISOR_TIMEOUT", DEFAULT_TIMEOUT_S))
    try:
        return call(paths.socket(), method, path, body, timeout)
    except DaemonUnreachable as error:
        raise AdvisorUnavailable(str(error)) from error
    except DaemonRefused as error:
        raise AdvisorUnavailable(f"the advisor could not advise this job: {error}") from error


def _reason(error: Exception) -> str:
    if isinstance(error, AdvisorUnavailable):
        return str(error)
    return f"the advisor failed ({type(error).__name__}: {error})"


def _show(advice: Advice, flags: Flags) -> None:
    if flags.json or not (flags.explain or sys.stderr.isatty()):
        return
    from rich.console import Console

    from advisor.recommend.choose import Recommendation
    from advisor.recommend.cli import show

    show(Recommendation.model_validate(advice.body["recommendation"]), Console(stderr=True))


def _agreed(flags: Flags) -> bool:
    """On a terminal the user confirms a rewrite unless ``--yes``; elsewhere the policy decides."""
    if flags.yes or flags.dry_run or not (sys.stdin.isatty() and sys.stderr.isatty()):
        return True
    answer = input("Submit with the advised changes? [Y/n] ").strip().lower()
    return answer in ("", "y", "yes")


def _finish(submission: Submission, flags: Flags, response: Advice | None) -> int:
    if flags.dry_run:
        submission = replace(submission, argv=["--test-only", *submission.argv])
    result = _sbatch(submission, capture=True)
    if flags.json:
        advice = None if response is None else response.body
        report = {"advice": advice, "sbatch": {"argv": submission.argv, "returncode": result.returncode}}
        print(json.dumps({**report, "stdout": result.stdout, "stderr": result.stderr}, indent=2))
    else:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
    job_id = _job_id(result.stdout) if result.returncode == 0 and not flags.dry_run else None
    if response is not None and job_id is not None:
        note = {"request_id": response.request_id, "job_id": job_id}
        try:
            _call("POST", "/submitted", json.dumps(note).encode())
        except Exception as error:  # the job is in; only the advisor's record of it is missing
            print(f"advise-submit: note: the advisor did not record job {job_id}: {error}", file=sys.stderr)
    return result.returncode


def _sbatch(submission: Submission, capture: bool) -> subprocess.CompletedProcess[str]:
    """The one place sbatch runs for a user: argv only, the user's own environment plus the advice's."""
    env = {**os.environ, **submission.env}
    try:
        return subprocess.run(
            ["sbatch", *submission.argv],
            input=submission.stdin,
            capture_output=capture,
            text=True,
            errors="surrogateescape",
            env=env,
            check=False,
        )
    except OSError as error:
        return subprocess.CompletedProcess(
            ["sbatch"], 127, "", f"advise-submit: error: cannot run sbatch: {error.strerror}\n"
        )


def _job_id(stdout: str) -> int | None:
    """``Submitted batch job N`` or, with --parsable, ``N[;cluster]``."""
    for word in stdout.replace(";", " ").split():
        if word.isdigit():
            return int(word)
    return None
