"""The `#ADVISOR` options as words: which are ours and the raw values they set, from the standard library.

`advise-submit` reads these before it decides anything (a factory model must be introspected in the user's own
process), and it must start fast; `advisor_lines` validates the values into a `JobDescription`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import read_directives

PREFIX = "#ADVISOR"


def _shape(text: str) -> list[str]:
    sides = re.split(r"[x,]", text)
    if len(sides) != 3:
        raise ValueError(f"expected CxHxW such as 3x224x224, not {text!r}")
    return sides


def _pair(text: str) -> list[str]:
    return text.split(":", 1) if ":" in text else [text, ""]


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered in {"yes", "true", "on", "1", "allow", "allowed"}:
        return True
    if lowered in {"no", "false", "off", "0", "forbid", "forbidden"}:
        return False
    raise ValueError(f"expected yes or no, not {text!r}")


# Each option and the field it sets; pydantic validates every value in one place.
OPTIONS: dict[str, str] = {
    "--model": "model",
    "--model-arg": "model_kwargs",
    "--num-classes": "model_kwargs",
    "--input-shape": "input_shape",
    "--sequence-length": "sequence_length",
    "--target-length": "target_length",
    "--task": "task",
    "--global-batch": "global_batch",
    "--epochs": "epochs",
    "--steps": "steps",
    "--dataset-size": "dataset_size",
    "--batch-range": "batch_range",
    "--amp": "allow_amp",
    "--grad-accum": "allow_grad_accum",
    "--workers": "workers",
    "--batch-flag": "batch_flag",
    "--command-style": "command_style",
}


def split_command_line(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """Leading job-description options (ours) and the sbatch command line that follows them."""
    index = 0
    while index < len(words) and words[index].split("=", 1)[0] in OPTIONS:
        index += 1 if "=" in words[index] else 2
    index = min(index, len(words))
    return list(words[:index]), list(words[index:])


def description_values(
    script: str, where: str, command_line: Sequence[str] = ()
) -> tuple[dict[str, Any], dict[str, str]]:
    """The fields the script's `#ADVISOR` lines and then the command line set, and the place each was set."""
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for directive in read_directives(script, PREFIX, where):
        _apply(directive.args, f"{where}:{directive.line}", values, origin)
    _apply(command_line, "command line", values, origin)
    return values, origin


def names_a_factory(values: dict[str, Any]) -> bool:
    """``package.module:factory`` is the user's own code, which only the user's process may import; so
    are ``hf:`` and ``timm:`` models built there (an ``hf:`` name may be the user's folder or cache)."""
    return ":" in str(values.get("model", ""))


def _apply(args: Sequence[str], place: str, values: dict[str, Any], origin: dict[str, str]) -> None:
    pending = list(args)
    while pending:
        word = pending.pop(0)
        name, has_value, value = word.partition("=")
        if name not in OPTIONS:
            raise ScriptError(place, f"unknown #ADVISOR option {name!r}")
        if not has_value:
            if not pending:
                raise ScriptError(place, f"option {name} needs a value")
            value = pending.pop(0)
        field = OPTIONS[name]
        try:
            _store(name, field, value, values)
        except ValueError as exc:
            raise ScriptError(place, f"{name}: {exc}") from None
        origin[field] = place


def _store(name: str, field: str, value: str, values: dict[str, Any]) -> None:
    if name == "--num-classes":
        values.setdefault(field, {})["num_classes"] = keyword_value(value)
    elif name == "--model-arg":
        key, has_value, literal = value.partition("=")
        if not has_value or not key.isidentifier():
            raise ValueError(f"expected KEY=VALUE, not {value!r}")
        values.setdefault(field, {})[key] = keyword_value(literal)
    elif name == "--input-shape":
        values[field] = _shape(value)
    elif name == "--batch-range":
        values[field] = _pair(value)
    elif name in {"--amp", "--grad-accum"}:
        values[field] = _boolean(value)
    else:
        values[field] = value


def keyword_value(text: str) -> int | float | bool | str:
    """A keyword argument's value: a JSON number or boolean, otherwise the text itself (`#ADVISOR --model-arg`
    and the commands' `--model-arg` alike)."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return text
    return parsed if isinstance(parsed, int | float | bool | str) else text
