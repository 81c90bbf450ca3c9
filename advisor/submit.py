"""`advise-submit [advisor options] [#ADVISOR options] [sbatch options] SCRIPT [args]`: sbatch, advised.

It asks the daemon, shows the advice, then submits the job with sbatch, as the user, exactly once: with the
advised changes when the policy applies them (and the user agrees), otherwise unchanged. Whatever goes
wrong on the advisor's side (no daemon, a slow one, an error, a bug here) the job is submitted unchanged
with one warning line; if Slurm refuses the advised job, the job as written goes in instead. sbatch's
own output and exit status are the wrapper's.

Advisor options: ``--dry-run`` (advise and ask Slurm with ``--test-only``, submit nothing), ``--json``
(the advice as JSON on stdout), ``--yes`` (apply without asking on a terminal), ``--no-rewrite`` (submit
unchanged, still advised), ``--explain`` (print the candidates and reasons even off a terminal).
Settings (`advisor.settings`): ``socket``, ``timeout_s`` (the whole call, default 2 s) and ``daemon_user``
(who may serve the socket besides root and the caller), from the settings file and ``ADVISOR_*`` variables.

The daemon's answer is untrusted input: `advisor.submit_guard` accepts only what a rewrite may do. A factory
model (``package.module:factory``) is the user's code: it is imported and called at submission time, in an
isolated child process with a deadline and a memory limit (`advisor.factory_table`), and whatever it does
costs at most the advice; the cli_filter, which asks as this does (`advisor.submit_ask`), never runs it.

It starts fast because it imports only the standard library on its way to sbatch: it speaks the API of
`advisor.api` as plain JSON (the daemon validates what it receives; this side checks the few fields it uses),
and loads pydantic, rich or torch only to show a table or to introspect a factory model.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from advisor import __version__
from advisor.jobscript.advisor_words import split_command_line
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import MAX_SCRIPT_BYTES, STDIN
from advisor.jobscript.options import parse_options, script_arguments
from advisor.submit_ask import WRAP, Answer, advise, ask, batch_flag, kill_warnings, reason
from advisor.submit_guard import SbatchCall, UserJob, added_words, sanitized

OURS = ("--dry-run", "--json", "--yes", "--no-rewrite", "--explain")
_ANSWERED_HERE = {"-h": "help", "--help": "help", "-V": "version", "--version": "version"}
"""sbatch's options the wrapper answers itself, by the name sbatch's option table gives them."""
HELP = """usage: advise-submit [advisor options] [#ADVISOR options] [sbatch options] SCRIPT [ARGS...]

sbatch, advised: the advisor predicts the job's run time on every partition it may use, shows the
candidates, and submits the job with sbatch, as you, exactly once (unchanged whenever the advisor
cannot help).

advisor options (first):
  --dry-run      advise and ask Slurm when the job would start (sbatch --test-only); submit nothing
  --json         the advice and sbatch's result as JSON on stdout
  --yes          apply the advice without asking, on a terminal too
  --no-rewrite   submit the job unchanged, still advised
  --explain      show the candidates and reasons even when not on a terminal
  --version      the advisor's version (sbatch --version: Slurm's)

#ADVISOR options (as in the script's #ADVISOR lines; these win):
  --model=NAME | package.module:factory    --num-classes=N    --model-arg=KEY=VALUE
  --input-shape=CxHxW    --global-batch=N    --epochs=X --dataset-size=N | --steps=N
  --batch-range=MIN:MAX    --amp=yes|no    --grad-accum=yes|no    --workers=N    --batch-flag=FLAG
  A factory is your own code: advise-submit imports and calls it when the job is submitted
  (plain sbatch never does).

environment (over the settings file, $ADVISOR_CONFIG or /etc/advisor/advisor.toml):
  ADVISOR_SOCKET        the daemon's socket (default /run/advisor/advisor.sock)
  ADVISOR_TIMEOUT       seconds the whole exchange with the daemon may take (default 2)
  ADVISOR_DAEMON_USER   who may serve the socket besides root and you (default advisor)

Every other option is sbatch's: see `sbatch --help`.
"""
PROMPT = "Submit with the advised changes? (n: submit the job as written; Ctrl-C: submit nothing) [Y/n] "
WRAPPED = "ADVISOR_WRAPPED"
"""Set on advise-submit's own sbatch call: the cli_filter inside it leaves the job alone
(`advisor.cli_filter`), so a job is never advised twice."""


class Flags(NamedTuple):
    dry_run: bool = False
    json: bool = False
    yes: bool = False
    no_rewrite: bool = False
    explain: bool = False


class SbatchInterrupted(Exception):
    """Ctrl-C while sbatch ran: whether the job got in is Slurm's to say."""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except SbatchInterrupted:
        print(
            "advise-submit: interrupted while sbatch ran; `squeue --me` shows whether the job is in",
            file=sys.stderr,
        )
        return 130
    except KeyboardInterrupt:
        print("\nadvise-submit: interrupted; nothing was submitted", file=sys.stderr)
        return 130


def _main(words: list[str]) -> int:
    flags, rest = _flags(words)
    description_args, sbatch_argv = split_command_line(rest)
    try:
        options, operands = parse_options(sbatch_argv, "command line")[0], script_arguments(sbatch_argv)
    except ScriptError as error:  # sbatch says what is wrong with the line, in its words
        if (answered := _answer_here({_ANSWERED_HERE.get(word, "") for word in sbatch_argv})) is not None:
            return answered
        _say(f"not advised: {error}; {_as_written(flags)}")
        return _sbatch(_dry(SbatchCall(argv=sbatch_argv), flags), capture=False).returncode
    names = {option.name for option in options}
    if (answered := _answer_here(names)) is not None:
        return answered
    if "usage" in names:  # sbatch's own: it prints and submits nothing
        return _sbatch(_dry(SbatchCall(argv=rest), flags), capture=False).returncode
    if "test-only" in names:  # sbatch's own dry run: advised as one, never submitted
        flags = flags._replace(dry_run=True)
    wrap = next((option.value for option in reversed(options) if option.name == "wrap"), None)
    script = None
    if wrap is not None and not operands:  # sbatch's own script for a --wrap command
        script = f"#!/bin/sh\n{wrap}\n".encode()
    elif wrap is None:
        with contextlib.suppress(OSError):
            script = Path(operands[0]).read_bytes() if operands else sys.stdin.buffer.read()
    if script is None:  # sbatch says what is wrong with the file, in its words
        return _sbatch(_dry(SbatchCall(argv=sbatch_argv), flags), capture=False).returncode
    where = WRAP if wrap is not None else operands[0] if operands else STDIN
    text = script.decode("utf-8", "surrogateescape")
    environ = {name: value for name, value in os.environ.items() if name.startswith("SBATCH_")}
    flag = batch_flag(text, where, description_args)
    job = UserJob(sbatch_argv, text, where, environ, flag, wrap=wrap is not None)
    if len(script) > MAX_SCRIPT_BYTES:
        return _finish(job, job.unchanged(), flags, None)  # sbatch refuses it, in its own words
    try:
        advice = advise(job, script, description_args, run_factory=True, preview=flags.dry_run)
        if advice.files_refused is not None:
            _say(f"note: advised without the files the job's command names ({advice.files_refused})")
        shown = _show(advice, job, flags)
        agreed = advice.submission.rewritten and not flags.no_rewrite and _agreed(flags)
    except Exception as error:  # fail-open: nothing on the advisor's side may cost the user their job
        _say(f"warning: {reason(error)}; {_as_written(flags, 'unchanged')}")
        return _finish(job, job.unchanged(), flags, None)
    _said(advice, job, flags, agreed, shown)
    return _finish(job, advice.submission if agreed else job.unchanged(), flags, advice)


def _answer_here(names: set[str]) -> int | None:
    """``--help`` and ``--version``, answered by the wrapper (the advisor's version); None: neither asked."""
    if "help" in names:
        print(HELP, end="")
        return 0
    if "version" in names:
        print(f"advise-submit (advisor) {__version__}")
        return 0
    return None


def _say(text: str) -> None:
    """One line on stderr (stdout is sbatch's, or --json's)."""
    print(f"advise-submit: {text}", file=sys.stderr)


def _as_written(flags: Flags, what: str = "it as written") -> str:
    """What happens to the job as the user wrote it: submitted, or under a dry run only asked about."""
    if flags.dry_run:
        what = what.removeprefix("it ")
        return f"asking Slurm about the job {what} (sbatch --test-only; a dry run submits nothing)"
    return f"submitting {what}"


def _said(advice: Answer, job: UserJob, flags: Flags, agreed: bool, shown: bool) -> None:
    """One line on what a rewrite did to the job, after the table too; where no table was shown, why the
    advice left the job as written. (A rewrite declined at the prompt was said there.)"""
    call = advice.submission
    if call.rewritten and agreed:
        verb = "would apply" if flags.dry_run else "applied"
        _say(sanitized(f"{verb}: {' '.join(_changes(job, call))}", limit=1000))
    elif call.rewritten and flags.no_rewrite:
        changes = " ".join(_changes(job, call))
        _say(sanitized(f"not applied (--no-rewrite): {changes}; {_as_written(flags)}", limit=1000))
    elif not call.rewritten and not shown:
        _say(sanitized(f"kept as written: {_why_unchanged(advice.body)}", limit=1000))


def _why_unchanged(body: dict[str, Any]) -> str:
    """The submission's note (why advice was not applied) or else the recommendation's first reason."""
    submission, recommendation = body.get("submission"), body.get("recommendation")
    notes = submission.get("notes") if isinstance(submission, dict) else None
    reasons = recommendation.get("reasons") if isinstance(recommendation, dict) else None
    said = [text for text in [*(notes or []), *(reasons or [])] if isinstance(text, str)]
    return said[0] if said else "the advisor suggests no change"


def _flags(words: list[str]) -> tuple[Flags, list[str]]:
    """Advisor options come first, before any #ADVISOR or sbatch option."""
    seen: dict[str, bool] = {}
    index = 0
    while index < len(words) and words[index] in OURS:
        seen[words[index].removeprefix("--").replace("-", "_")] = True
        index += 1
    return Flags(**seen), words[index:]


def _show(advice: Answer, job: UserJob, flags: Flags) -> bool:
    """The table, if one is shown (on a terminal, or ``--explain``); an answer this version cannot read is
    no advice (a daemon upgraded before the wrapper). Off a terminal a run likely killed at its limit is
    said (``--json`` carries it in the JSON)."""
    if flags.json:
        return False
    if not (flags.explain or sys.stderr.isatty()):
        for warning in kill_warnings(advice.body):
            print(f"advise-submit: warning: {warning}", file=sys.stderr)
        return False
    from rich.console import Console

    from advisor.recommend.choose import Recommendation
    from advisor.recommend.cli import show

    changes = _changes(job, advice.submission) if advice.submission.rewritten else None
    show(Recommendation.model_validate(advice.body.get("recommendation")), Console(stderr=True), changes)
    return True


def _changes(job: UserJob, call: SbatchCall) -> list[str]:
    """A rewrite as what it adds to the user's command line and environment."""
    changes = added_words(job.argv, call.argv, call.env)
    if call.stdin is not None and call.stdin != job.script:
        changes.append(f"(the script on stdin, {job.batch_flag} set to the micro-batch)")
    return changes


def _agreed(flags: Flags) -> bool:
    """On a terminal the user confirms a rewrite unless ``--yes``; elsewhere the policy decides."""
    if flags.yes or flags.dry_run or not (sys.stdin.isatty() and sys.stderr.isatty()):
        return True
    # On stderr, like the table: stdout is sbatch's (and --json's) alone.
    print(PROMPT, end="", file=sys.stderr, flush=True)
    while (line := sys.stdin.readline()) and line.strip().lower() not in ("", "y", "yes", "n", "no"):
        print("please answer y or n (Ctrl-C submits nothing): ", end="", file=sys.stderr, flush=True)
    if not line:  # Ctrl-D: no
        print(file=sys.stderr)
    if line.strip().lower() in ("", "y", "yes") and line:
        return True
    print("advise-submit: submitting the job as written", file=sys.stderr)
    return False


def _finish(job: UserJob, submission: SbatchCall, flags: Flags, response: Answer | None) -> int:
    """Runs sbatch once; if Slurm refuses the advised job (no job id), the job as written, once more, so the
    advice never costs the user their job. The daemon is told which of the two went in."""
    result = _sbatch(_dry(submission, flags), capture=True)
    refused = None
    if submission.rewritten and result.returncode not in (0, 127) and _job_id(result.stdout) is None:
        refused = {"argv": submission.argv, "returncode": result.returncode, "stderr": result.stderr}
        why = sanitized(" ".join(result.stderr.split()) or f"exit status {result.returncode}")
        _say(f"note: sbatch refused the advised job ({why}); {_as_written(flags)}")
        submission = job.unchanged()
        result = _sbatch(_dry(submission, flags), capture=True)
    if flags.json:
        advice = None if response is None else response.body
        report = {"advice": advice, "sbatch": {"argv": submission.argv, "returncode": result.returncode}}
        report["refused"] = refused
        print(json.dumps({**report, "stdout": result.stdout, "stderr": result.stderr}, indent=2))
    else:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
    # With --wait sbatch exits with the job's status: a job id printed is a job in, whatever the status.
    job_id = None if flags.dry_run else _job_id(result.stdout)
    if response is not None and response.request_id and job_id is not None:  # "": nothing was kept
        note = {"request_id": response.request_id, "job_id": job_id, "applied": submission.rewritten}
        try:
            ask("POST", "/submitted", json.dumps(note).encode())
        except Exception as error:  # the job is in; only the advisor's record of it is missing
            print(
                f"advise-submit: note: the advisor did not record job {job_id}: {reason(error)}",
                file=sys.stderr,
            )
    return result.returncode


def _dry(submission: SbatchCall, flags: Flags) -> SbatchCall:
    return submission._replace(argv=["--test-only", *submission.argv]) if flags.dry_run else submission


def _sbatch(submission: SbatchCall, capture: bool) -> subprocess.CompletedProcess[str]:
    """The one place sbatch runs for a user: argv only, the user's own environment plus the advice's."""
    env = {**os.environ, **submission.env, WRAPPED: "1"}
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
    except KeyboardInterrupt:
        raise SbatchInterrupted from None
    except OSError as error:
        said = f"advise-submit: error: cannot run sbatch: {error.strerror}\n"
        if not capture:  # sbatch's own output would have gone straight to the terminal
            sys.stderr.write(said)
        return subprocess.CompletedProcess(["sbatch"], 127, "", said)


def _job_id(stdout: str) -> int | None:
    """``Submitted batch job N`` or, with --parsable, ``N[;cluster]``."""
    for word in stdout.replace(";", " ").split():
        if word.isdigit():
            return int(word)
    return None
