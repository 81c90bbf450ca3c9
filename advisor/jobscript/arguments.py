"""A training program's arguments as its own parser takes them: flags with their values, ``-`` and ``_``
spellings as one, switches that take no value, flags of several values, and its positionals."""

from __future__ import annotations

from collections.abc import Sequence

_SWITCHES = frozenset(
    {
        "amp", "fp16", "bf16", "channels-last", "pin-mem", "sync-bn", "no-prefetcher",
        "gradient-checkpointing", "use-peft", "do-train", "do-eval", "overwrite-output-dir", "packing",
    }
)  # fmt: skip
"""Flags that take no value in these programs (HF's may take a boolean: ``--fp16 True``)."""
_SIZES = {"input-size": 3}
"""Flags of several values: timm's ``--input-size 3 256 256`` (C H W)."""
_BOOLEANS = frozenset({"true", "false", "1", "0", "yes", "no"})


def counts(*words: str) -> bool:
    """Whether every word is a whole number above zero (a batch, a step count, processes): what a
    program's sizes must be before they describe a job."""
    return all(word.isdigit() and int(word) > 0 for word in words)


def program_options(arguments: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Flags with their values (``True`` flags as ``""``), ``-``/``_`` spellings as one (and Lightning's
    ``--model.init_args.name`` as ``--model.name``), and positionals."""
    flags: dict[str, str] = {}
    positional: list[str] = []
    index = 0
    while index < len(arguments):
        word = arguments[index]
        index += 1
        if not word.startswith("-") or word == "-":
            positional.append(word)
            continue
        name, has_value, value = word.partition("=")
        key = name.lstrip("-").replace("_", "-").replace(".init-args.", ".")  # jsonargparse's spelling too
        following = arguments[index] if index < len(arguments) else "-"
        if has_value:
            flags[key] = value
        elif key in _SWITCHES and following.lower() not in _BOOLEANS:
            flags[key] = ""
        elif not following.startswith("-"):
            end = _values_end(arguments, index, _SIZES.get(key, 1))
            flags[key], index = " ".join(arguments[index:end]), end
        else:
            flags[key] = ""
    return flags, positional


def _values_end(arguments: Sequence[str], start: int, most: int) -> int:
    """Where a flag's values end: after ``most`` of them, or at the next flag."""
    end = start + 1
    while end < min(start + most, len(arguments)) and not arguments[end].startswith("-"):
        end += 1
    return end
