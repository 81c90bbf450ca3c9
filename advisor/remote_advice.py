"""`advisor recommend` on an install without the service's packages (a login node's base install): the
daemon recommends, as a preview (answered like a submission, never audited), and this install shows it.

The daemon reads no user's file: the script's bytes, the words, the caller's ``SBATCH_*`` variables and the
files its training command names travel in the request, as advise-submit sends them; a factory model is not
run here (the daemon then advises from what the script says without its layer table, as for plain sbatch). A
module of its own, beside `admin` (`explain`): the recommender's part does not reach for the daemon that
imports it."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console

from advisor.api import AdviseRequest, AdviseResponse
from advisor.daemon.transport import DaemonRefused, DaemonUnreachable, Service, call
from advisor.jobscript.advisor_words import split_command_line
from advisor.jobscript.datasets import load_datasets
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.submission import named_files, parse_submission
from advisor.recommend.cli import report
from advisor.settings.validated import Settings

WAIT_S = 30.0
"""How long a person waits for a recommendation at least: fresh advice asks Slurm (a queue, `--test-only`
per candidate), longer than a submission's budget (`timeout_s`), past which a submission fails open."""


def request_for(script: Path, words: Sequence[str], environ: Mapping[str, str]) -> AdviseRequest:
    """What advise-submit would send for `advisor recommend SCRIPT WORDS`, marked a preview."""
    description_args, sbatch_options = split_command_line(words)
    try:
        data = script.read_bytes()
    except OSError as exc:
        raise ScriptError(str(script), f"cannot read: {exc.strerror}") from None
    argv = [*sbatch_options, str(script)]
    sent = {name: value for name, value in environ.items() if name.startswith("SBATCH_")}
    return AdviseRequest.of(
        data,
        where=str(script),
        sbatch_argv=argv,
        description_args=description_args,
        environ=sent,
        files=named_files(data, str(script), argv, sent, description_args),
        preview=True,
    )


def recommend_by_daemon(args: argparse.Namespace, console: Console, missing: ModuleNotFoundError) -> int:
    """`advisor recommend`'s answer from the daemon; `missing` is why this install cannot recommend."""
    as_json = args.json or "--json" in args.words
    words = [word for word in args.words if word != "--json"]
    parsed = parse_submission(args.script, words, os.environ, load_datasets(args.settings.datasets))
    body = request_for(args.script, words, os.environ).model_dump_json().encode()
    settings: Settings = args.settings
    service = Service(settings.socket, settings.service, settings.munge_socket)
    try:
        answer = call(service, "POST", "/advise", body, max(settings.timeout_s, WAIT_S))
    except (DaemonUnreachable, DaemonRefused) as error:
        print(
            f"advisor: error: {error}; this install cannot recommend by itself: {missing.name} is not "
            "installed (pip install 'advisor[service]')",
            file=sys.stderr,
        )
        return 1
    print(f"advisor: the daemon's recommendation ({missing.name} is not installed here)", file=sys.stderr)
    result = AdviseResponse.model_validate_json(answer).recommendation
    return report(result, parsed, args.script, words, as_json, console)
