"""getopt_long as sbatch calls it (``+`` mode: stop at the first non-option), and the SBATCH_* variables.

Messages are glibc's, so a user sees the words sbatch would have printed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from advisor.jobscript.errors import ScriptError
from advisor.jobscript.option_table import BY_NAME, BY_SHORT, ENVIRONMENT, OPTIONS, Arg, OptionSpec


class Option(NamedTuple):
    """One option as given, and where.
    (A NamedTuple, as every record on plain sbatch's cli_filter path: a dataclass loads `inspect`, 7 ms.)"""

    name: str
    value: str | None
    where: str


def parse_options(args: Sequence[str], where: str | Callable[[int], str]) -> tuple[list[Option], list[str]]:
    """Options up to the first non-option (or ``--``), and what follows them untouched.

    ``where`` names the place of an argument by its index, for scripts whose arguments span lines.
    """
    place = where if callable(where) else (lambda _: where)
    options: list[Option] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            index += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        start = index
        if arg.startswith("--"):
            spec, value, index = _long(args, index, place(start))
            options.append(Option(spec.key, value, place(start)))
        else:
            found, index = _shorts(args, index, place(start))
            options.extend(Option(spec.key, value, place(start)) for spec, value in found)
        index += 1
    return options, list(args[index:])


def command_line_segments(argv: Sequence[str]) -> tuple[list[list[Option]], list[str]]:
    """Option segments separated by ``:`` (one per hetjob component), then the script and its args."""
    segments: list[list[Option]] = []
    rest = list(argv)
    while True:
        options, rest = parse_options(rest, "command line")
        segments.append(options)
        if not rest or rest[0] != ":":
            return segments, rest
        rest = rest[1:]


def script_arguments(argv: Sequence[str]) -> list[str]:
    """What follows sbatch's options: the script's path and its arguments; empty when sbatch reads stdin."""
    return command_line_segments(argv)[1]


def options_from_environment(environ: Mapping[str, str]) -> list[Option]:
    """The SBATCH_* variables sbatch reads, in its order; flags ignore the value as sbatch does."""
    return [
        Option(name, None if BY_NAME[name].arg is Arg.NONE else environ[variable], variable)
        for variable, name in ENVIRONMENT
        if variable in environ
    ]


def _long(args: Sequence[str], index: int, where: str) -> tuple[OptionSpec, str | None, int]:
    arg = args[index]
    name, has_value, value = arg[2:].partition("=")
    spec = _lookup(name, arg, where)
    if has_value:
        if spec.arg is Arg.NONE:
            raise ScriptError(where, f"option '--{spec.name}' doesn't allow an argument")
        return spec, value, index
    if spec.arg is Arg.REQUIRED:
        if index + 1 >= len(args):
            raise ScriptError(where, f"option '--{spec.name}' requires an argument")
        return spec, args[index + 1], index + 1
    return spec, None, index


def _lookup(name: str, arg: str, where: str) -> OptionSpec:
    """Exact name first, else a prefix that names one option (aliases of one option count once)."""
    if name in BY_NAME:
        return BY_NAME[name]
    matches = [spec for spec in OPTIONS if spec.name.startswith(name)]
    if not matches:
        raise ScriptError(where, f"unrecognized option '{arg}'")
    first, *others = matches
    rivals = [spec for spec in others if (spec.arg, spec.key) != (first.arg, first.key)]
    if not rivals:
        return first
    listed = " ".join(f"'--{spec.name}'" for spec in [first, *rivals])
    raise ScriptError(where, f"option '{arg}' is ambiguous; possibilities: {listed}")


def _shorts(args: Sequence[str], index: int, where: str) -> tuple[list[tuple[OptionSpec, str | None]], int]:
    """A cluster such as ``-Hv``, ``-pgpu`` or ``-p gpu``; returns the index of its last argument."""
    arg = args[index]
    found: list[tuple[OptionSpec, str | None]] = []
    for position in range(1, len(arg)):
        letter = arg[position]
        spec = BY_SHORT.get(letter)
        if spec is None:
            raise ScriptError(where, f"invalid option -- '{letter}'")
        rest = arg[position + 1 :]
        if spec.arg is Arg.NONE:
            found.append((spec, None))
            continue
        if rest or spec.arg is Arg.OPTIONAL:
            found.append((spec, rest or None))
        elif index + 1 < len(args):
            index += 1
            found.append((spec, args[index]))
        else:
            raise ScriptError(where, f"option requires an argument -- '{letter}'")
        break
    return found, index
