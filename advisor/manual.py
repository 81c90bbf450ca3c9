"""`advisor completion bash` and `advisor man`: shell completion and the manual page, both generated from
the command line's own parser, so neither can fall behind a new command or option."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor import __version__

if TYPE_CHECKING:
    from rich.console import Console

    from advisor.settings.validated import Settings


_HELP = {
    "completion": 'bash completion: eval "$(advisor completion bash)"',
    "man": "the manual page (troff), from the parser: advisor man | man -l -",
}


@dataclass(frozen=True)
class Command:
    """One command path (``models list``) with its help, usage and options (each with its help)."""

    path: str
    help: str
    usage: str
    options: tuple[tuple[str, str], ...]
    actions: tuple[str, ...]
    """The words that may follow it (its sub-commands)."""


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    completion = commands.add_parser("completion", help='bash completion: eval "$(advisor completion bash)"')
    completion.add_argument("shell", choices=("bash",))
    completion.set_defaults(handler=_completion)
    manual = commands.add_parser(
        "man", help="the manual page (troff), from the parser: advisor man | man -l -"
    )
    manual.set_defaults(handler=_man)


def walk(parser: argparse.ArgumentParser, path: str = "", help_text: str = "") -> Iterator[Command]:
    """Every command under ``parser``, the top first, each before its sub-commands."""
    options, children = [], []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            children = [(name, sub, helps.get(name, "")) for name, sub in action.choices.items()]
        elif action.option_strings and action.help != argparse.SUPPRESS:
            options.append((", ".join(action.option_strings), (action.help or "") % vars(action)))
    usage = " ".join(parser.format_usage().split()).removeprefix("usage: ")
    yield Command(
        path, help_text or parser.description or "", usage, tuple(options), tuple(n for n, *_ in children)
    )
    for name, sub, sub_help in children:
        yield from walk(sub, f"{path} {name}".strip(), sub_help)


def bash_script(commands: list[Command]) -> str:
    """A completion function: the words after the longest command path typed so far, else file names."""
    paths = "|".join(command.path for command in commands)
    cases = "\n".join(
        f'    "{command.path}") words="{" ".join([*command.actions, *_flags(command)])}" ;;'
        for command in commands
    )
    return f"""# bash completion for advisor {__version__}: eval "$(advisor completion bash)"
_advisor() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" path="" candidate word words="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${{COMP_WORDS[i]}}"
    candidate="${{path:+$path }}$word"
    [[ "|{paths}|" == *"|$candidate|"* ]] && path="$candidate"
  done
  case "$path" in
{cases}
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F _advisor advisor
"""


def troff(commands: list[Command]) -> str:
    """The manual page: the synopsis, then each command with its usage and options."""
    top, *rest = commands
    lines = [
        f'.TH ADVISOR 1 "" "advisor {__version__}" "User Commands"',
        ".SH NAME",
        "advisor \\- " + _escape(top.help.split(";")[0]),
        ".SH SYNOPSIS",
        ".B " + _escape(top.usage),
        ".SH OPTIONS",
        *_options(top),
        ".SH COMMANDS",
    ]
    for command in rest:
        lines += [
            f'.SS "advisor {_escape(command.path)}"',
            _escape(command.help),
            ".PP",
            _escape(command.usage),
        ]
        lines += _options(command)
    return "\n".join(lines) + "\n"


def _flags(command: Command) -> list[str]:
    return [flag for flags, _ in command.options for flag in flags.split(", ")]


def _options(command: Command) -> list[str]:
    lines = []
    for flags, help_text in command.options:
        lines += [".TP", f".B {_escape(flags)}", _escape(help_text)]
    return lines


def _escape(text: str) -> str:
    """troff's own characters: a backslash, a leading dot or quote, and every hyphen as a minus."""
    escaped = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + escaped if escaped.startswith((".", "'")) else escaped


def _every(args: argparse.Namespace) -> list[Command]:
    from advisor.cli import every_command

    return list(walk(every_command(args.settings)))


def _completion(args: argparse.Namespace, console: Console) -> int:
    sys.stdout.write(bash_script(_every(args)))
    return 0


def _man(args: argparse.Namespace, console: Console) -> int:
    sys.stdout.write(troff(_every(args)))
    return 0
