"""The script checks and the directive tokenizer of sbatch 22.05 (``_get_script_buffer``,
``_opt_batch_script``, ``get_argument``), reproduced rule for rule because users rely on its quirks.

Quirks worth knowing, all checked against sbatch 22.05.8: a directive needs no whitespace after its
prefix (``#SBATCH--time=5`` works, ``#SBATCHX`` is an invalid directive ``X``); a backslash does not escape
whitespace; an empty quoted argument ends the line; so does a bare ``hetjob``/``packjob`` word where an
argument starts, which separates components only as the line's first word.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from advisor.jobscript.errors import ScriptError

#: C's isspace() in the "C" locale, which is what sbatch uses.
_C_SPACE = " \t\n\v\f\r"
_HET_SEPARATORS = ("hetjob", "packjob")
#: sbatch still reads the pre-2.x ``#SLURM`` prefix (with a warning).
SBATCH_PREFIXES = ("#SBATCH", "#SLURM")
MAX_SCRIPT_BYTES = 4 * 2**20
"""slurmctld's default max_script_size: a longer script is refused (ESLURM_PATHNAME_TOO_LONG's words)."""
STDIN = "<stdin>"
"""``where`` of a script that sbatch reads from its standard input."""
_NO_SHEBANG = (
    "This does not look like a batch script.  The first line must start with #! followed by the path "
    "to an interpreter. For instance: #!/bin/sh"
)


class Directive(NamedTuple):
    """One directive line's arguments.
    (A NamedTuple, as every record on plain sbatch's cli_filter path: a dataclass loads `inspect`, 7 ms.)"""

    line: int
    args: tuple[str, ...]
    text: str
    #: A hetjob separator has args ("hetjob",), as does a quoted 'hetjob' (which sbatch refuses).
    separator: bool = False


def check_script(data: bytes, where: str) -> str:
    """Refuse what sbatch refuses, in sbatch's order; the text keeps every byte (surrogateescape)."""
    if not data:
        raise ScriptError(where, "Batch script is empty!")
    # sbatch tests a C string, so a NUL ends the whitespace check early.
    if not data.split(b"\0", 1)[0].strip(_C_SPACE.encode()):
        raise ScriptError(where, "Batch script contains only whitespace!")
    if not data.startswith(b"#!"):
        raise ScriptError(where, _NO_SHEBANG)
    if b"\0" in data:
        raise ScriptError(
            where, "The Slurm controller does not allow scripts that contain a NULL character '\\0'."
        )
    if b"\r\n" in data:
        raise ScriptError(
            where,
            "Batch script contains DOS line breaks (\\r\\n) instead of expected UNIX line breaks (\\n).",
        )
    if len(data) > MAX_SCRIPT_BYTES:
        raise ScriptError(
            where, "Batch job submission failed: Pathname of a file, directory or other parameter too long"
        )
    return data.decode("utf-8", errors="surrogateescape")


def read_directives(text: str, prefix: str | tuple[str, ...], where: str) -> list[Directive]:
    """The directive lines of the leading comment block, split into arguments as sbatch splits them."""
    directives: list[Directive] = []
    for number, line, _ in _header_lines(text):
        matched = next((p for p in _prefixes(prefix) if line.startswith(p)), None)
        if matched is None:
            continue
        # sbatch skips the blanks after the prefix before it looks for a separator or an argument.
        rest = line[len(matched) :].lstrip(_C_SPACE)
        if _separator_at(rest, 0):
            directives.append(Directive(line=number, args=("hetjob",), text=line, separator=True))
        else:
            args = tuple(_split_arguments(rest, f"{where}:{number}"))
            directives.append(Directive(line=number, args=args, text=line))
    return directives


def body_start(text: str) -> int:
    """Offset of the first line that ends the directive block (len(text) when none does).

    The same for every prefix: for sbatch any command ends the block, whatever the directives.
    """
    end = 0
    for _, line, offset in _header_lines(text):
        end = min(offset + len(line) + 1, len(text))
    return end


def header_lines(text: str) -> list[str]:
    """The lines of the leading comment block: where sbatch (and its #PBS/#BSUB translators) look."""
    return [line for _, line, _ in _header_lines(text)]


def _split_arguments(rest: str, where: str) -> Iterator[str]:
    """sbatch's get_argument applied until it returns nothing."""
    position = 0
    while True:
        argument, position = _next_argument(rest, position, where)
        if argument is None:
            return
        yield argument


def _next_argument(line: str, start: int, where: str) -> tuple[str | None, int]:
    position = start
    while position < len(line) and line[position] in _C_SPACE:
        position += 1
    if _separator_at(line, position):
        return None, position
    if position < len(line) and line[position] == ":":
        raise ScriptError(where, f"Unexpected `:` in [{line[start:]}]")
    chars: list[str] = []
    quote = ""
    escaped = False
    while position < len(line) and (quote or line[position] not in _C_SPACE):
        char = line[position]
        position += 1
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
            continue
        elif quote:
            if char == quote:
                quote = ""
                continue
        elif char in "\"'":
            quote = char
            continue
        elif char == "#":
            position -= 1
            break
        chars.append(char)
    if quote:
        raise ScriptError(where, f"Unmatched `{quote}` in [{line[start:]}]")
    return ("".join(chars) if chars else None), position


def _separator_at(line: str, position: int) -> str:
    """The hetjob/packjob word standing alone at ``position``, or ""."""
    for word in _HET_SEPARATORS:
        end = position + len(word)
        if line[position:end].lower() == word and (end == len(line) or line[end] in _C_SPACE):
            return word
    return ""


def _prefixes(prefix: str | tuple[str, ...]) -> tuple[str, ...]:
    return (prefix,) if isinstance(prefix, str) else prefix


def _header_lines(text: str) -> Iterator[tuple[int, str, int]]:
    """(line number, line, offset) of each line before the first command, as sbatch's next_line sees them."""
    offset = 0
    for number, line in enumerate(text.split("\n"), start=1):
        if offset >= len(text) or _is_command(line):
            return
        yield number, line, offset
        offset += len(line) + 1


def _is_command(line: str) -> bool:
    stripped = line.lstrip(_C_SPACE)
    return bool(stripped) and not stripped.startswith("#")
