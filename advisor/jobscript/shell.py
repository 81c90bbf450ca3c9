"""A job script as its shell reads it, as far as its training command needs: logical lines (a backslash
continues a line, and so does an open quote or an array's open parenthesis) and the variables it sets,
strings and arrays, so that ``python run_clm.py $MODEL_ARGS "${TRAIN_ARGS[@]}"`` has its words.

Scripts keep their arguments in variables (``GPT_ARGS="--num-layers 24 ..."`` over several lines, Megatron's
``GPT_MODEL_ARGS=( ... )``): a variable only the run computes (``$(nproc)``, a backtick) is None, and
`advisor.jobscript.launchers.words_of` puts `UNKNOWN` where it is used.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from advisor.jobscript.launchers import SUBMITTED, UNKNOWN, expand_text, words_of

_NAME = r"([A-Za-z_][A-Za-z0-9_]*)"
_ASSIGNMENT = re.compile(rf"(?:export\s+)?{_NAME}=(.*)", re.DOTALL)
_ARRAY = re.compile(rf"(?:declare\s+-a\s+)?{_NAME}(\+?)=\((.*)\)", re.DOTALL)
_HERE = re.compile(r"(?<!<)<<-?(?!<)\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")
"""A here-document's start (``cat > cfg.yaml <<'EOF'``) and its delimiter; not a here-string (``<<<``)."""
_ARRAY_OPENS = re.compile(rf"\s*(?:declare\s+-a\s+)?{_NAME}\+?=\(")


@dataclass(frozen=True)
class Document:
    """A here-document: the text a command reads (``cat > cfg.yaml <<EOF``), expanded by the shell unless
    its delimiter is quoted (``<<'EOF'``)."""

    text: str
    literal: bool


@dataclass
class Line:
    number: int
    """Where it starts in the script."""
    text: str
    document: Document | None = None
    """The here-document its command reads."""


def logical_lines(script: str) -> list[Line]:
    """The script's commands and assignments, each on one line, comments and blank lines left out."""
    lines: list[Line] = []
    pending, start, here, body = "", 0, None, list[str]()
    for number, raw in enumerate(script.splitlines(), start=1):
        if here is not None:  # a here-document's body is text, not commands
            if raw.strip() == here[1]:
                lines[-1].document, here = _document(here, body), None
            else:
                body.append(raw)
            continue
        if not pending:
            start = number
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        pending += raw
        if _open(pending):
            pending += "\n"
            continue
        lines.append(Line(start, pending))
        here, pending, body = _HERE.search(_body(pending)), "", []
    if pending:
        lines.append(Line(start, pending))
    return [line for line in lines if line.text.strip() and not line.text.lstrip().startswith("#")]


def _document(here: re.Match[str], body: list[str]) -> Document:
    """The body of the here-document ``here`` opened (`_HERE`)."""
    literal = re.search(r"<<-?\s*['\"]", here[0]) is not None
    if here[0].startswith("<<-"):  # ``<<-`` strips leading tabs
        body = [line.lstrip("\t") for line in body]
    return Document("\n".join(body) + "\n", literal)


def written_to(words: Sequence[str]) -> tuple[str, bool] | None:
    """The file a command writes its here-document to (``cat > cfg.yaml``, ``tee cfg.yaml``), and whether
    it appends (``>>``, ``tee -a``); None for any other command."""
    if not words or words[0] not in ("cat", "tee") or not any(word.startswith("<<") for word in words):
        return None
    if words[0] == "tee":
        names = [word for word in words[1:] if not word.startswith(("-", "<<"))]
        return (names[0], "-a" in words) if names else None
    for position, word in enumerate(words):
        operator = re.fullmatch(r"(>>?)(.*)", word)
        if operator is not None:
            target = operator[2] or (words[position + 1] if position + 1 < len(words) else "")
            return (target, operator[1] == ">>") if target else None
    return None


def _open(text: str) -> bool:
    """Whether the line goes on: a quote not closed, or an array's parenthesis."""
    if _ARRAY_OPENS.match(text):
        return not _body(text).rstrip().endswith(")")
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return text.count("\n") < _MOST_LINES
    return False


_MOST_LINES = 200
"""An unbalanced quote stops joining lines here: the rest of the script is not one string."""


def _body(text: str) -> str:
    """The text without each line's comment (an array's elements may each carry one)."""
    return "\n".join(re.sub(r"(^|\s)#.*", "", line) for line in text.split("\n"))


def assigned(text: str, variables: Mapping[str, str | None]) -> tuple[str, str | None] | None:
    """The variable a line sets and its value, its own references in place; None where the line sets
    none. A value of one word is the word, its run-time parts `UNKNOWN` (``/scratch/$USER/run``: a path
    found again where it is used), None where a command computes it; an array's elements and a
    string's words are kept shell-quoted, each word's run-time part `UNKNOWN`, so that ``$ARGS`` and
    ``"${ARGS[@]}"`` split back into them."""
    array = _ARRAY.fullmatch(_body(text).strip())
    if array is not None:
        name, append, body = array.groups()
        before = variables.get(name) if append else ""
        joined = shlex.join(words_of(body, variables))
        return name, None if before is None else f"{before} {joined}".strip()
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return None
    if words[:1] == ["export"]:
        words = words[1:]
    found = _ASSIGNMENT.fullmatch(words[0]) if len(words) == 1 else None
    if found is None:
        return None
    name, value = found.groups()
    if len(value.split()) > 1:
        return name, shlex.join(words_of(value, variables))
    if "$(" in value or "`" in value:
        return name, None
    return name, expand_text(value, variables)


_SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})


def commands_of(words: Sequence[str]) -> list[list[str]]:
    """A line's commands: its words split where the shell starts another (``&&``, ``||``, ``;``, ``|``,
    ``&``), so that ``cd /work && srun python train.py`` runs train.py (it read as no command at all)."""
    commands: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS:
            commands.append([])
        elif word.endswith(";"):  # shlex keeps ``cd /work;`` as one word
            commands[-1].append(word[:-1])
            commands.append([])
        else:
            commands[-1].append(word)
    return [command for command in commands if command]


def moved(folder: str, words: Sequence[str]) -> str:
    """Where ``cd`` takes the script, from ``folder`` ("" where it is submitted): an absolute or home
    path, one relative to where it was, or `UNKNOWN` where the run computes it (``cd -`` too)."""
    target = words[0] if words else "~"
    if UNKNOWN in target or target == "-" or (UNKNOWN in folder and not _absolute(target)):
        return UNKNOWN
    if target.startswith(SUBMITTED):
        return _submitted(target)
    if _absolute(target) or not folder:
        return target
    return posixpath.normpath(posixpath.join(folder, target))


def within(folder: str, name: str) -> str | None:
    """A file a command names, as a path from where the script is submitted; None where the folder it
    is relative to is known only when the job runs."""
    return None if UNKNOWN in folder and not _absolute(name) else located(folder, name)


def located(folder: str, name: str) -> str:
    """A file a command names, as the script finds it again: from where it is submitted, through a folder
    the run names (`UNKNOWN`) too; one under `SUBMITTED` from there, wherever ``cd`` went."""
    if name.startswith(SUBMITTED):
        return _submitted(name)
    return name if _absolute(name) or not folder else posixpath.join(folder, name)


def _submitted(path: str) -> str:
    """``$SLURM_SUBMIT_DIR/a/b`` as ``a/b``: a path from where the job is submitted ("" for that folder)."""
    rest = path[len(SUBMITTED) :].lstrip("/")
    return posixpath.normpath(rest) if rest else ""


def _absolute(path: str) -> bool:
    return path.startswith(("/", "~", SUBMITTED))
