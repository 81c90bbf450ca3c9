"""Plain `sbatch`, advised: the helper Slurm's ``cli_filter/lua`` plugin runs (`advisor/data/cli_filter.lua`).

Inside sbatch, as the user, after the script's ``#SBATCH`` lines, the environment and the command line are
applied and before the controller is contacted, the Lua hands sbatch's options (as JSON, in a file) to
``advisor-cli-filter pre FILE``. This asks the daemon as advise-submit does, prints the advice on
stderr, and answers on stdout with the option changes, one ``NAME<TAB>VALUE`` per line, then ``#end``; the
Lua applies them only when the answer is complete and every name is one a rewrite may set. After the
submission the Lua reports the job with ``advisor-cli-filter post REQUEST JOBID APPLIED``.

Fail-open as advise-submit is: whatever goes wrong here prints one warning line and answers no change, so
the job goes in exactly as the user wrote it. A ``--wrap`` command is advised as its one-line script
(``#!/bin/sh`` and the command); a script on stdin is left alone with one line (sbatch's options do not
carry it), as is a script with ``#ADVISOR --off`` or ``#SBATCH hetjob``; the Lua itself leaves
alone a job advise-submit submits (its ``WRAPPED`` mark), a user's who sets ``ADVISOR_OFF=1``, and a hetjob
of the command line. "applied" is the Lua's to say, once it has set the options.

This runs inside whoever's sbatch, root's included, so it never runs model code: a factory job is sent as
written but without its layer table, and the daemon advises it from history and says why in one line; the
daemon's words reach the terminal sanitised.
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the helper runs in every sbatch: what only `advisor cli-filter install` uses loads there
    import argparse

    from rich.console import Console

    from advisor.settings.validated import Settings
    from advisor.submit_guard import SbatchCall, UserJob

SETTABLE = (
    "partition",
    "time",
    "gres",
    "gpus",
    "gpus-per-node",
    "gpus-per-task",
    "gpus-per-socket",
    "export",
)
"""The sbatch options a rewrite may change, and so the only ones the Lua sets."""


def main(argv: Sequence[str] | None = None) -> int:
    """``pre FILE`` or ``post REQUEST JOBID APPLIED``; exit status 0 whatever happens (the Lua reads only
    the answer)."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["pre"] and len(words) == 2:
        return pre_submit(words[1])
    if words[:1] == ["post"]:
        return post_submit(words[1:])
    print(
        "usage: advisor-cli-filter pre OPTIONS.json | post REQUEST JOBID 0|1 (run by cli_filter.lua)",
        file=sys.stderr,
    )
    return 0


def pre_submit(path: str) -> int:
    """``pre FILE``: the option changes on stdout; never a failure sbatch would see."""
    options: object = None
    try:
        options = json.loads(Path(path).read_text(encoding="utf-8"))
        changes = _changes(options)
    except Exception as error:  # fail-open: the job goes in as written
        from advisor.submit_ask import reason

        print(f"advisor: warning: {reason(error)}; {_as_written(options)}", file=sys.stderr)  # one line
        changes = []
    for name, value in changes:
        print(f"{name}\t{value}")
    print("#end")
    return 0


def _as_written(options: object) -> str:
    """What sbatch does with the job as the user wrote it: submits it, or under ``--test-only`` asks Slurm
    about it and submits nothing (either, where its options could not be read)."""
    if not isinstance(options, dict):
        return "sbatch gets the job as written"
    if "test-only" in options:
        return "asking Slurm about the job as written (sbatch --test-only submits nothing)"
    return "submitting the job as written"


def post_submit(words: Sequence[str]) -> int:
    """``post REQUEST JOBID APPLIED``: the job the advice became, for calibration."""
    from advisor.submit_ask import ask, reason

    try:
        request_id, job_id, applied = words[0], int(words[1]), words[2] == "1"
        note = {"request_id": request_id, "job_id": job_id, "applied": applied}
        ask("POST", "/submitted", json.dumps(note).encode())
    except Exception as error:  # the job is in; only the advisor's record of it is missing
        print(f"advisor: note: the job was not recorded: {reason(error)}", file=sys.stderr)
    return 0


def sbatch_words(options: dict[str, Any]) -> list[str] | None:
    """sbatch's options as a command line that means the same (what advise-submit would have been given),
    the script and its arguments last (a ``--wrap`` command has neither); None for a script on stdin."""
    argv = options.get("argv")
    if not isinstance(argv, list) or not (argv or isinstance(options.get("wrap"), str)):
        return None
    words = []
    for name, value in options.items():
        if name in ("argv", "spank", "spank_job_env") or not isinstance(value, str):
            continue
        words.append(f"--{name}" if value in ("", "set") else f"--{name}={value}")
    return [*words, *(str(word) for word in argv)]


def _changes(options: object) -> list[tuple[str, str]]:
    from advisor.submit_ask import WRAP, advise, batch_flag, kill_warnings
    from advisor.submit_guard import UntrustedAdvice, UserJob

    if not isinstance(options, dict):
        raise ValueError("sbatch's options are not a JSON object")
    words, written = sbatch_words(options), _as_written(options)
    if words is None:
        _say(f"a script on stdin is not advised here (advise-submit advises it); {written}")
        return []
    wrap = options.get("wrap") if not options["argv"] else None
    where = WRAP if wrap is not None else words[len(words) - len(options["argv"])]
    script = f"#!/bin/sh\n{wrap}\n".encode() if wrap is not None else Path(where).read_bytes()
    text = script.decode("utf-8", "surrogateescape")
    if "#ADVISOR --off" in text:
        return []
    job = UserJob(words, text, where, {}, batch_flag(text, where, []), wrap=wrap is not None)
    if job.hetjob:  # the Lua leaves command-line ones (``:``) alone before asking
        _say(f"a heterogeneous job is not advised; {written}")
        return []
    # A factory is the user's own code and runs nowhere here: the daemon advises its job from history,
    # and its reasons (printed below) say so.
    answer = advise(job, script, [], run_factory=False, preview="test-only" in options)
    if not _REQUEST_ID.fullmatch(answer.request_id):
        raise UntrustedAdvice("the answer's request id is not one the daemon gives")
    recommendation = answer.body.get("recommendation") or {}
    for reason in recommendation.get("reasons") or []:
        _say(str(reason))
    for warning in kill_warnings(answer.body):
        _say(f"warning: {warning}")
    changes = _option_changes(job, answer.submission, written) if answer.submission.rewritten else []
    if answer.request_id:  # "applied" is the Lua's to say, once it has set the options
        changes.append(("#request", f"{answer.request_id} {int(bool(changes))}"))
    return changes


def _say(text: str) -> None:
    """One message on sbatch's stderr, folded to the terminal's width (sbatch's own lines are short); the
    daemon's words and the script's reach the terminal only as printable text."""
    from advisor.submit_guard import sanitized

    line = sanitized(f"advisor: {text}", limit=1000)
    print(textwrap.fill(line, width=_width(), subsequent_indent="  "), file=sys.stderr)


def _width() -> int:
    """The width of the terminal on stderr (stdout is the Lua's pipe), else 120."""
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        return 120


def _option_changes(job: UserJob, call: SbatchCall, written: str) -> list[tuple[str, str]]:
    """What the rewrite added, as (option, value); its ``ADVISOR_*`` variables named in the job's own
    ``--export`` (``NONE`` stays ``NONE``, with them: sbatch takes ``NONE,NAME=VALUE``). A change sbatch's
    options cannot carry (a new batch size in the script, another option) is said, and nothing is set."""
    if call.stdin is not None and call.stdin != job.script:
        _say(
            f"the advice sets {job.batch_flag} in the script, which plain sbatch cannot; "
            f"{written} (advise-submit applies the whole advice)"
        )
        return []
    kept = set(job.argv)
    changes = []
    for word in call.argv:
        if word not in kept and word.startswith("--") and "=" in word:
            name, value = word[2:].split("=", 1)
            if name == "job-name":  # named for a script on stdin; sbatch keeps reading the job's file
                continue
            if name not in SETTABLE:
                _say(
                    f"the advice changes --{name}, which plain sbatch's filter cannot set; "
                    f"{written} (advise-submit applies the whole advice)"
                )
                return []
            changes.append((name, value))
    if call.env and not any(name == "export" for name, _ in changes):
        own = next((word[9:] for word in reversed(job.argv) if word.startswith("--export=")), "ALL")
        changes.append(("export", ",".join([own, *(f"{name}={value}" for name, value in call.env.items())])))
    return changes


_SAFE_PATH = re.compile(r"[A-Za-z0-9_./+-]+")
_REQUEST_ID = re.compile(r"[0-9a-f]{0,64}")
"""A request id as the daemon makes them (hex; empty: nothing recorded): what the Lua stores and reports."""
HELPER_SLACK_S = 3.0
"""The helper's own start (Python, imports) on top of the daemon's timeout."""


FAST_START = (
    "import sys; sys.path.append(sys.argv.pop(1)); from advisor.cli_filter import main; sys.exit(main())"
)
"""This module's `main`, run by ``python -I -S -c`` with the folder holding the ``advisor`` package."""


def install(conf_dir: Path, helper: Path | None, timeout_s: float) -> Path:
    """Writes ``cli_filter.lua`` beside slurm.conf. Its helper is this advisor's own, run by this Python as
    ``python -I -S`` (no site: its .pth files and the packages' set-up are a third of an sbatch's wait, and
    the helper needs the standard library alone; no ``PYTHON*`` variables of the user's), or the program
    ``helper`` names. The Lua runs it through a shell, so each path may hold no character a shell reads."""
    from advisor.settings import package_data

    if helper is None:
        python, packages = Path(sys.executable), Path(__file__).resolve().parent.parent
        paths, command = [python, packages], f"{python} -I -S -c '{FAST_START}' {packages}"
    else:
        paths, command = [helper], str(helper)
    for path in paths:
        if not path.is_absolute() or not _SAFE_PATH.fullmatch(str(path)):
            raise ValueError(f"the helper's path {path} must be absolute, of letters, digits and ._/+- only")
    text = package_data("cli_filter.lua").read_text(encoding="utf-8")
    text = text.replace("@HELPER@", command).replace("@TIMEOUT_S@", f"{timeout_s + HELPER_SLACK_S:g}")
    target = conf_dir / "cli_filter.lua"
    target.write_text(text, encoding="utf-8")
    target.chmod(0o644)
    return target


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    parser = commands.add_parser("cli-filter", help="plain sbatch, advised: Slurm's cli_filter/lua plugin")
    actions = parser.add_subparsers(required=True, metavar="ACTION")
    install_parser = actions.add_parser(
        "install",
        help="write cli_filter.lua beside slurm.conf (then add CliFilterPlugins=cli_filter/lua to it)",
    )
    install_parser.add_argument("--slurm-conf-dir", type=Path, required=True, help="the folder of slurm.conf")
    install_parser.add_argument(
        "--helper",
        type=Path,
        help="a program the Lua runs instead of this advisor's own helper (which it starts as python -I -S)",
    )
    install_parser.set_defaults(handler=_install)


def _install(args: argparse.Namespace, console: Console) -> int:
    try:
        target = install(args.slurm_conf_dir, args.helper, args.settings.timeout_s)
    except (OSError, ValueError) as error:
        console.print(f"advisor: error: {error}", highlight=False)
        return 1
    console.print(
        f"wrote {target}; enable it with CliFilterPlugins=cli_filter/lua in {args.slurm_conf_dir}/slurm.conf",
        highlight=False,
    )
    return 0
