"""The command line for admins and for trying things out; `advisor --help` lists the commands."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from advisor import __version__, argtypes, readable

if TYPE_CHECKING:
    from rich.console import Console

    from advisor.settings.validated import Settings

COMMAND_MODULES = (
    ("advisor.bench.cli", ("bench",)),
    ("advisor.predict.cli", ("models", "predict")),
    ("advisor.report", ("report",)),
    ("advisor.policy.cli", ("policy",)),
    ("advisor.recommend.cli", ("recommend",)),
    ("advisor.daemon.main", ("daemon",)),
    ("advisor.admin", ("status", "explain")),
    ("advisor.compress.cli", ("compress", "decompress")),
    ("advisor.history.cli", ("history",)),
    ("advisor.comm.cli", ("comm",)),
    ("advisor.profiling", ("profile",)),
    ("advisor.cli_filter", ("cli-filter",)),
    ("advisor.web.cli", ("web",)),
    ("advisor.site.cli", ("init-site",)),
    ("advisor.manual", ("completion", "man")),
    ("advisor.sandbox.cli", ("sandbox",)),
)
"""The modules that add commands, with the commands each adds: only the module of the command given is
imported (`advisor --help` imports none), and on a base install (no service extra) a module that cannot
load still lists its commands, and each says what it needs when run."""
SUMMARIES = {
    "bench": "measure training steps and layers on each partition",
    "models": "train and evaluate the per-machine predictors",
    "predict": "a model's step time and peak memory on a partition",
    "report": "what advice saved, and predicted against actual times of finished advised jobs",
    "policy": "admin policies: which partitions, objectives and limits",
    "recommend": "candidates, choice and explanation for a batch script, without submitting it",
    "daemon": "serve advice on a Unix socket (run as the advisor's own user)",
    "status": "daemon health, models, last benchmarks",
    "explain": "the candidates and reasons behind an advised job",
    "compress": "store dense-layer weights as indices on a shared curve",
    "decompress": "a compressed file back into a state dict",
    "history": "run times from Slurm's accounting: train, evaluate",
    "comm": "collective communication per partition: measure, ingest, show",
    "profile": "a model's training step profiled here, beside its prediction, part by part",
    "cli-filter": "plain sbatch, advised: Slurm's cli_filter/lua plugin",
    "web": "the advisor in a browser: compare partitions for a model (a personal server)",
    "init-site": "write the settings template, the policies, pip's constraints and the systemd units",
    "completion": 'bash completion: eval "$(advisor completion bash)"',
    "man": "the manual page (troff), from the parser: advisor man | man -l -",
    "sandbox": "a real Slurm cluster on this machine",
}
"""Each command's line in `advisor --help`, which lists them without importing their modules (a test
checks each against the module's own)."""
EXTRAS = {"compress": "compress", "decompress": "compress", "sandbox": "sandbox"}
"""The tools beside the product, each an extra of its own: the extra a command's missing package comes with
(every other command's comes with the service)."""
REPORTED = frozenset(
    {
        "advisor.sandbox.cluster.SandboxError",
        "advisor.sandbox.spec.SandboxConfigError",
        "advisor.slurm.runner.SlurmError",
        "advisor.jobscript.errors.ScriptError",
        "advisor.jobscript.datasets.DatasetsFileError",
        "advisor.introspect.errors.IntrospectionError",
        "builtins.FileNotFoundError",
    }
)
"""Errors a command ends with as one line, named so that catching them imports none of their modules.
FileNotFoundError: a file the command reads is missing (the database, `advisor.store.NoDatabase`)."""


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    command = _command_word(words)
    if command is None:  # --help, --version, or no command: what argparse prints needs no settings
        _parser(None).parse_args(words)
    from advisor.settings import SettingsError, load_settings

    try:
        settings = load_settings(os.environ, _config_option(words))
    except SettingsError as exc:
        print(f"advisor: error: {exc}", file=sys.stderr)
        return 1
    args = _parser(settings, command).parse_args(words)
    from rich.console import Console

    from advisor.introspect.table_cache import keep_tables_in

    keep_tables_in(settings.tables_dir)
    try:
        return int(args.handler(args, Console()))
    except ModuleNotFoundError as missing:  # a base install: the command loads the service's packages
        if _is_ours(missing):
            raise
        if args.command == "recommend":  # a base install: the daemon recommends (a preview)
            from advisor.remote_advice import recommend_by_daemon

            return recommend_by_daemon(args, Console(), missing)
        return _unavailable(_needs_extra(args.command, missing))
    except Exception as exc:
        if not _reported(exc):
            raise
        print(f"advisor: error: {exc}", file=sys.stderr)
        return 1


def _reported(exc: BaseException) -> bool:
    return any(f"{kind.__module__}.{kind.__qualname__}" in REPORTED for kind in type(exc).__mro__)


def _command_word(words: Sequence[str]) -> str | None:
    """The command asked for: the first word that is not an option (or ``--config``'s file)."""
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == "--config":
            skip = True
        elif not word.startswith("-"):
            return word
    return None


def _config_option(words: Sequence[str]) -> Path | None:
    """``--config FILE`` before the command: the settings decide the commands' defaults, so come first."""
    for index, word in enumerate(words):
        if word == "--config" and index + 1 < len(words):
            return Path(words[index + 1])
        if word.startswith("--config="):
            return Path(word.removeprefix("--config="))
        if not word.startswith("-"):
            break
    return None


def _parser(settings: Settings | None, command: str | None = None) -> argparse.ArgumentParser:
    """Every command; only ``command``'s module loads here (the others are listed by their `SUMMARIES`), so
    ``--help`` starts fast and a missing service dependency is one clear error. No command, no settings:
    ``advisor --help`` lists the commands before the settings (pydantic, 0.4 s here) load."""
    parser = argparse.ArgumentParser(prog="advisor", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the settings file (default: $ADVISOR_CONFIG, else /etc/advisor/advisor.toml where it exists)",
    )
    parser.set_defaults(settings=settings)
    commands = parser.add_subparsers(required=True, metavar="COMMAND", dest="command")
    _add_parse_and_inspect(commands)
    for module_name, names in COMMAND_MODULES:
        if settings is not None and command in names:
            _add_module(commands, module_name, names, settings)
        else:
            for name in names:
                commands.add_parser(name, help=SUMMARIES.get(name), add_help=False)
    return parser


def _add_parse_and_inspect(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`advisor parse` and `advisor inspect`: both work without a daemon."""
    parse = commands.add_parser(
        "parse",
        help="show how a batch script and sbatch options are understood, without a daemon",
        usage="advisor parse SCRIPT [job description options] [sbatch options] [--json]",
    )
    parse.add_argument("--json", action="store_true", help="the whole parse as JSON")
    parse.add_argument("script", type=Path)
    parse.add_argument("words", nargs=argparse.REMAINDER, help="#ADVISOR options, then sbatch options")
    parse.set_defaults(handler=_parse_script)
    inspect = commands.add_parser("inspect", help="a model's layer table and totals, from the meta device")
    inspect.add_argument(
        "model", help="a torchvision model name, timm:NAME, hf:NAME or package.module:factory"
    )
    inspect.add_argument(
        "--input-shape", type=argtypes.input_shape, default=(3, 224, 224), help="C,H,W (default 3,224,224)"
    )
    inspect.add_argument("--batch-size", type=int, default=1)
    inspect.add_argument("--num-classes", type=int, help="passed to the model's constructor")
    argtypes.model_options(inspect)
    inspect.add_argument("--json", action="store_true", help="print the layer table as JSON")
    inspect.set_defaults(handler=_inspect)


def every_command(settings: Settings) -> argparse.ArgumentParser:
    """The parser with every command's own options (each module loaded): completion and the manual."""
    parser = _parser(settings)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for module_name, names in COMMAND_MODULES:
        for name in names:
            commands.choices.pop(name, None)
        _add_module(commands, module_name, names, settings)
    return parser


def _add_module(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    module_name: str,
    names: Sequence[str],
    settings: Settings,
) -> None:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as missing:
        if _is_ours(missing):
            raise
        for name in names:
            _add_unavailable(commands, name, missing)
        return
    module.add_commands(commands, settings)


def _is_ours(missing: ModuleNotFoundError) -> bool:
    """A module of the advisor's own missing is a broken install, not a missing extra."""
    return (missing.name or "advisor").split(".")[0] == "advisor"


def _needs_extra(command: str, missing: ModuleNotFoundError) -> str:
    extra = EXTRAS.get(command, "service")
    owner = "the service" if extra == "service" else f"advisor[{extra}]"
    return (
        f"advisor {command} needs {owner}'s packages: {missing.name} is not installed "
        f"(pip install 'advisor[{extra}]')"
    )


def _add_unavailable(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, missing: ModuleNotFoundError
) -> None:
    """The command stays in ``--help``; run (with any words, ``--help`` among them), it says what it needs."""
    text = _needs_extra(name, missing)
    # No option prefix: every word, ``-h`` too, is an argument, so the command always reaches its handler.
    stub = commands.add_parser(
        name,
        help=f"{SUMMARIES.get(name, name)} (needs advisor[{EXTRAS.get(name, 'service')}])",
        add_help=False,
        prefix_chars="\0",
    )
    stub.add_argument("words", nargs=argparse.REMAINDER)
    stub.set_defaults(handler=lambda _args, _console: _unavailable(text))


def _unavailable(text: str) -> int:
    print(f"advisor: error: {text}", file=sys.stderr)
    return 1


def _inspect(args: argparse.Namespace, console: Console) -> int:
    # torch is imported only here: the other commands start without it.
    from advisor.inspection import inspect_command

    return inspect_command(args, console)


def _parse_script(args: argparse.Namespace, console: Console) -> int:
    from rich.table import Table

    from advisor.jobscript.datasets import load_datasets
    from advisor.jobscript.submission import parse_submission

    words = [word for word in args.words if word != "--json"]
    parsed = parse_submission(args.script, words, os.environ, load_datasets(args.settings.datasets))
    if args.json or "--json" in args.words:
        print(parsed.model_dump_json(indent=2))
        return 0
    table = Table(title=str(args.script), show_header=False, title_justify="left")
    rows = parsed.request.model_dump(exclude={"script", "options"})
    if parsed.description is not None:
        # A token model's input is its sequence: the image shape's default is not read, so not shown.
        unread = {"input_shape"} if parsed.description.sequence_length is not None else set()
        described = parsed.description.model_dump(exclude=unread)
        rows |= {f"#ADVISOR {name}": value for name, value in described.items()}
    for name, value in rows.items():
        if value not in (None, [], (), {}, ""):
            table.add_row(readable.header(name), _parsed_value(name, value))
    console.print(table)
    if parsed.undescribed is not None:
        console.print(f"no job description: {parsed.undescribed}", highlight=False)
    return 0


def _parsed_value(name: str, value: object) -> str:
    """A parsed field as written in a script: ``3x32x32``, ``1 GPU per node (--gres)``."""
    if name.endswith("input_shape") and isinstance(value, list | tuple):
        return "x".join(str(side) for side in value)
    if name == "gpus" and isinstance(value, dict):
        kind = f" {value['type']}" if value.get("type") else ""
        count = value["count"]
        return f"{count}{kind} GPU{'s' if count != 1 else ''} per {value['per']} (--{value['option']})"
    if name.endswith("_mb") and isinstance(value, int):
        return readable.size_mb(value)
    return readable.value(value)
