"""A job description read from the training command line, for scripts without `#ADVISOR --model`.

Four conventions are understood, as their own programs define their flags:
- ``imagenet``: PyTorch's ImageNet example (``-a/--arch``, ``-b/--batch-size`` for all GPUs of a node,
  ``--epochs``, the data folder as its argument);
- ``torchvision``: torchvision's reference scripts (``--model``, ``-b/--batch-size`` per GPU, ``--epochs``,
  ``--data-path``);
- ``timm``: timm's train.py (``--model``, ``-b/--batch-size`` per process, ``--grad-accum-steps``,
  ``--epochs``, ``--data-dir`` or the data folder as its argument);
- ``hf``: Hugging Face ``TrainingArguments`` (``--per_device_train_batch_size``,
  ``--gradient_accumulation_steps``, ``--num_train_epochs``, ``--max_steps``, ``--model_name_or_path``;
  ``-`` and ``_`` spellings alike).
Such a script follows its own flags, not the advice's ``ADVISOR_*`` variables (``follows_advice`` is
False): the advice is its partition and time limit, on as many GPUs as it asks for, predicted in its own
precision (``--amp``, ``--fp16``, ``--bf16``) and accumulation.
Under ``python``, ``python -m``, ``torchrun``, ``python -m torch.distributed.run`` and ``srun``. Lines
continue after a backslash, comments are dropped, and a variable the script sets to a literal (``BS=256``)
is followed; one computed at run time is not guessed, and then nothing is inferred. Pure: the caller hands
in the world size (from the Slurm request) and the dataset table (`advisor.jobscript.datasets`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from advisor.jobscript.datasets import Dataset

STYLES = ("imagenet", "torchvision", "timm", "hf")
_ASSIGNMENT = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S*)")
_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_LAUNCHERS = {"python", "python3", "torchrun", "srun", "accelerate"}
_TORCHVISION_NAME = re.compile(r"[a-z][a-z0-9_]*")
_SWITCHES = frozenset({"amp", "fp16", "bf16", "channels-last", "pin-mem", "sync-bn", "no-prefetcher"})
"""Flags that take no value in the four programs (HF's may take a boolean: ``--fp16 True``)."""
_BOOLEANS = frozenset({"true", "false", "1", "0", "yes", "no"})
UNKNOWN = "\x00"
"""A word whose value the script computes at run time."""


@dataclass(frozen=True)
class Inferred:
    """The fields read from one command line, and where: what `#ADVISOR` lines may still override."""

    values: dict[str, Any]
    place: str
    style: str
    command: str


@dataclass(frozen=True)
class _Line:
    number: int
    text: str


def infer_description(
    script: str,
    where: str,
    world_size: int,
    nodes: int,
    datasets: Mapping[str, Dataset],
    style: str | None = None,
) -> Inferred | None:
    """The first training command the script runs, read in ``style`` (default: recognised by its flags);
    None where no command says enough (a model the advisor can build, a batch size, a length)."""
    variables: dict[str, str | None] = {}
    for line in _logical_lines(script):
        assignment = _ASSIGNMENT.fullmatch(line.text.split(" #", 1)[0].strip())
        if assignment is not None:
            name, value = assignment.groups()
            variables[name] = None if ("$(" in value or "`" in value) else _expand(value, variables)
            continue
        words = _words(line.text, variables)
        program = _program_arguments(words) if words else None
        if program is None:
            continue
        chosen = style or _style(program)
        if chosen is None:
            continue
        values = _read(chosen, program, world_size, nodes, datasets)
        if values is not None:
            command = " ".join(word.replace(UNKNOWN, "?") for word in words)
            return Inferred(values, f"{where}:{line.number}", chosen, command)
    return None


def _logical_lines(script: str) -> list[_Line]:
    lines: list[_Line] = []
    pending, start = "", 0
    for number, raw in enumerate(script.splitlines(), start=1):
        if not pending:
            start = number
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        lines.append(_Line(start, pending + raw))
        pending = ""
    if pending:
        lines.append(_Line(start, pending))
    return [line for line in lines if line.text.strip() and not line.text.lstrip().startswith("#")]


def _expand(text: str, variables: Mapping[str, str | None]) -> str | None:
    """``$NAME`` and ``${NAME}`` replaced by what the script set them to; None where one is unknown."""
    unknown = False

    def value(match: re.Match[str]) -> str:
        nonlocal unknown
        found = variables.get(match[1] or match[2])
        unknown = unknown or found is None
        return found or ""

    expanded = _REFERENCE.sub(value, text)
    return None if unknown or "$" in expanded else expanded


def _words(text: str, variables: Mapping[str, str | None]) -> list[str]:
    """The line's words with the script's variables in place; a value only known at run time is `UNKNOWN`
    (an option keeps its name: ``--nproc_per_node=$NGPU`` is that option with an unknown value)."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError:  # unbalanced quotes: not a command this reads
        return []
    expanded = []
    for word in words:
        found = _expand(word, variables) if "$" in word else word
        if found is None:
            name, has_value, _ = word.partition("=")
            found = f"{name}={UNKNOWN}" if word.startswith("-") and has_value and "$" not in name else UNKNOWN
        expanded.append(found)
    return expanded


def _program_arguments(words: list[str]) -> list[str] | None:
    """The training program's own arguments, after its launchers; None for a line that runs no Python."""
    index, saw_python = 0, False
    while index < len(words):
        word = words[index]
        base = word.rsplit("/", 1)[-1]
        if base in ("srun", "torchrun", "accelerate") or (base == "launch" and index > 0):
            index += 1
            index = _skip_options(words, index)
            continue
        if base.startswith("python"):
            saw_python, index = True, _skip_options(words, index + 1)
            if index < len(words) and words[index] == "-m":
                module = words[index + 1] if index + 1 < len(words) else None
                index += 2
                if module == "torch.distributed.run":
                    index = _skip_options(words, index)
                    continue
                return words[index:]
            continue
        if word.endswith(".py"):
            return words[index + 1 :]
        return words[index + 1 :] if saw_python else None
    return None


def _skip_options(words: Sequence[str], index: int) -> int:
    """Past a launcher's own options (``--nproc_per_node=4``, ``-u``, ``--nnodes 2``)."""
    while index < len(words) and words[index].startswith("-"):
        word = words[index]
        index += 1
        if "=" not in word and word not in ("-u", "-O", "-B") and index < len(words):
            following = words[index]
            if not following.endswith(".py") and not following.startswith("-"):
                index += 1
    return index


def _options(arguments: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Flags with their values (``True`` flags as ``""``), ``-``/``_`` spellings as one, and positionals."""
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
        key = name.lstrip("-").replace("_", "-")
        following = arguments[index] if index < len(arguments) else "-"
        if has_value:
            flags[key] = value
        elif key in _SWITCHES and following.lower() not in _BOOLEANS:
            flags[key] = ""
        elif not following.startswith("-"):
            flags[key] = arguments[index]
            index += 1
        else:
            flags[key] = ""
    return flags, positional


def _style(arguments: Sequence[str]) -> str | None:
    flags, _ = _options(arguments)
    if "per-device-train-batch-size" in flags:
        return "hf"
    if "a" in flags or "arch" in flags:
        return "imagenet"
    if "grad-accum-steps" in flags or "data-dir" in flags:
        return "timm"
    if "model" in flags:
        return "torchvision"
    return None


@dataclass(frozen=True)
class _Convention:
    """The flags of each part, and what its program assumes where a flag is absent."""

    model: tuple[str, ...]
    batch: tuple[str, ...]
    epochs: tuple[str, ...]
    defaults: dict[str, str]
    accumulation: tuple[str, ...] = ()
    amp: tuple[str, ...] = ()
    """Switches that turn mixed precision on."""
    steps: tuple[str, ...] = ()
    data: tuple[str, ...] = ()
    per_node: bool = False
    """The batch is for all GPUs of a node (PyTorch's ImageNet example), not per device."""


_CONVENTIONS = {
    "imagenet": _Convention(
        ("a", "arch"), ("b", "batch-size"), ("epochs",),
        {"model": "resnet18", "batch": "256", "epochs": "90"}, per_node=True,
    ),
    "torchvision": _Convention(
        ("model",), ("b", "batch-size"), ("epochs",), {"batch": "32", "epochs": "90"}, amp=("amp",),
        data=("data-path",),
    ),
    "timm": _Convention(
        ("model",), ("b", "batch-size"), ("epochs",), {"batch": "128", "epochs": "300"},
        accumulation=("grad-accum-steps",), amp=("amp",), data=("data-dir",),
    ),
    "hf": _Convention(
        ("model-name-or-path",), ("per-device-train-batch-size",), ("num-train-epochs",),
        {"batch": "8", "epochs": "3"}, accumulation=("gradient-accumulation-steps",), amp=("fp16", "bf16"),
        steps=("max-steps",),
        data=("dataset-name", "train-dir", "train-file"),
    ),
}  # fmt: skip


class _Unknown(Exception):
    """A value the script computes at run time: nothing is guessed."""


def _read(
    style: str, arguments: Sequence[str], world: int, nodes: int, datasets: Mapping[str, Dataset]
) -> dict[str, Any] | None:
    flags, positional = _options(arguments)
    convention = _CONVENTIONS[style]

    def value(part: str) -> str | None:
        names: tuple[str, ...] = getattr(convention, part)
        for name in names:
            if name in flags:
                found = flags[name]
                if UNKNOWN in found:
                    raise _Unknown(name)
                return found
        return convention.defaults.get(part)

    try:
        model, batch, epochs, steps = value("model"), value("batch"), value("epochs"), value("steps")
        accumulation = value("accumulation") or "1"
        amp = [flags[name] for name in convention.amp if name in flags]
        if any(UNKNOWN in switch for switch in amp):
            raise _Unknown("amp")
        data = value("data") or next(
            (word for word in [*positional, *flags.values()] if _dataset(word, datasets)), None
        )
    except _Unknown:
        return None
    scale = nodes if convention.per_node else world
    global_batch = _product(batch, accumulation, str(scale))
    if model is None or not _TORCHVISION_NAME.fullmatch(model) or global_batch is None:
        return None
    dataset = _dataset(data, datasets)
    values: dict[str, Any] = {"model": model, "global_batch": str(global_batch)}
    if steps and steps not in ("-1", "0"):
        values["steps"] = steps
    elif epochs and dataset is not None:
        values |= {"epochs": epochs, "dataset_size": str(dataset.samples)}
    else:
        return None
    if dataset is not None:
        values["input_shape"] = ["3", str(dataset.side), str(dataset.side)]
        values["model_kwargs"] = {"num_classes": dataset.classes}
    # The script follows its own flags, not the advice's variables: its precision and batch stay.
    own_amp = any(switch.lower() not in ("false", "0", "no") for switch in amp)
    own = {"own_amp": own_amp, "own_accumulation": accumulation}
    return values | own | {"allow_amp": False, "allow_grad_accum": False, "follows_advice": False}


def _product(*factors: str | None) -> int | None:
    result = 1
    for factor in factors:
        if factor is None or not factor.isdigit() or int(factor) < 1:
            return None
        result *= int(factor)
    return result


def _dataset(data: str | None, datasets: Mapping[str, Dataset]) -> Dataset | None:
    if not data:
        return None
    lowered = data.lower()
    for name in sorted(datasets, key=len, reverse=True):
        if name in lowered:
            return datasets[name]
    return None
