"""A factory model's layer table, for the callers that run as the user (`advise-submit`, `advisor web`).

A factory (``package.module:factory``) is the user's own code: it is imported and called in a child of the
caller (`advisor.introspect.child`) with a deadline and a memory limit, so whatever it does costs at most
the advice. The child starts isolated (``python -I``: no working directory, no ``PYTHONPATH``, no user
site on its path), so a ``json.py`` left in a shared folder cannot stand in for the standard library while
the advisor and torch load; the places the user's own package may come from (their ``PYTHONPATH``, and
the working directory where it holds the factory's package, as ``python -m`` would find it) are added
after those, for the factory's import alone. The daemon imports no user code; it validates the table it is
sent (`daemon_table`). The cli_filter runs none either: it sends no table; the daemon then builds what is
library code (a torchvision name, ``timm:NAME``, an ``hf:NAME`` of the shipped architectures) and advises
a factory or a user's folder from the user's history (`not_built_here` says why).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.jobscript.advisor_words import description_values, names_a_factory
from advisor.jobscript.errors import ScriptError
from advisor.submit_guard import sanitized

if TYPE_CHECKING:
    from advisor.introspect.table import LayerTable, TrainingSettings
    from advisor.jobscript.advisor_lines import JobDescription
    from advisor.jobscript.commands import Inferred

TIMEOUT_S = 60
MEMORY_BYTES = 8 * 2**30
_TRAINS = re.compile(r"--model|model[_-]name[_-]or[_-]path|--config|\btrl\b|\.ya?ml\b|\.json\b")
"""A training command whose model may be read from it (`advisor.jobscript.commands`)."""
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
"""The child builds models from configurations only; should anything in it try the hub, it may not."""


class FactoryFailed(RuntimeError):
    """The factory named could not be introspected; the message says why, in one printable line."""


def named_factory(text: str, where: str, description_args: list[str]) -> str | None:
    """The ``package.module:factory`` the job description names, else None (a torchvision name, none, or a
    description the daemon will report with its place)."""
    try:
        values = description_values(text, where, description_args)[0]
    except ScriptError:
        return None
    return str(values["model"]) if names_a_factory(values) else None


def factory_table(text: str, where: str, description_args: list[str]) -> dict[str, Any] | None:
    """The table of the model the script (its `#ADVISOR` lines, else its training command) or the command
    line describes, where this process must build it: a factory, or an ``hf:``/``timm:`` model (the user's
    folders and cache); None for a torchvision name, which the daemon introspects itself, and for a
    description the daemon will report, with its place."""
    try:
        named = description_values(text, where, description_args)[0]
    except ScriptError:
        return None
    if not names_a_factory(named) and ("model" in named or not _TRAINS.search(text)):
        return None  # decided on the standard library alone: this runs before every submission
    description = _described(text, where, description_args)
    if description is None or not names_a_factory({"model": description.model}):
        return None
    from advisor.introspect.hub import cache_folder

    cache = cache_folder(os.environ)
    request = {
        "model": description.model,
        "input_shape": description.input_shape,
        "model_kwargs": description.model_kwargs,
        "sequence_length": description.sequence_length,
        "task": description.task,
        "target_length": description.target_length,
        "places": [] if cache is None else [str(cache)],
        "memory_bytes": MEMORY_BYTES,
        "search_path": search_path(description.model, os.environ, Path.cwd()),
    }
    try:
        result = subprocess.run(
            [sys.executable, "-I", "-m", "advisor.introspect.child"],
            input=json.dumps(request),
            env={**os.environ, **OFFLINE},
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise FactoryFailed(
            f"model {description.model} took over {error.timeout:.0f} s to introspect"
        ) from None
    try:
        if result.returncode == 0:
            table = json.loads(result.stdout)
            if isinstance(table, dict):
                return table
    except ValueError:
        pass
    why = result.stderr.strip().splitlines() or [f"exit status {result.returncode}, no layer table"]
    raise FactoryFailed(f"model {description.model} could not be introspected: {sanitized(why[-1])}")


def _described(text: str, where: str, description_args: list[str]) -> JobDescription | None:
    """The job description as the daemon will read it, and the files its command names read here."""
    from advisor.jobscript.advisor_lines import describe_job
    from advisor.jobscript.commands import CommandReading, Grant, infer_description
    from advisor.jobscript.datasets import shipped_datasets
    from advisor.jobscript.submission import read_named_file

    def infer(style: str | None) -> Inferred | None:
        reading = CommandReading(shipped_datasets(), read_named_file)
        return infer_description(text, where, Grant(1, 1), reading, style)

    try:
        return describe_job(text, where, description_args, infer)[0]
    except ScriptError:
        return None


def search_path(model: str, environ: Mapping[str, str], cwd: Path) -> list[str]:
    """Where the user asked their package be found: each ``PYTHONPATH`` entry, then the working directory
    if the factory's top-level package or module lies there (what ``python -m`` found before)."""
    entries = environ.get("PYTHONPATH", "").split(os.pathsep)
    places = [str(cwd / entry) if not Path(entry).is_absolute() else entry for entry in entries if entry]
    top = model.split(":", 1)[0].split(".", 1)[0]
    if (cwd / top).is_dir() or (cwd / f"{top}.py").is_file():
        places.append(str(cwd))
    return places


def table_for(
    description: JobDescription, *, allow_factories: bool, environ: Mapping[str, str] | None = None
) -> LayerTable:
    """The layer table of the model a job description names, on its input (an image, or token ids);
    ``environ`` (the user's, in their own process) says where their Hugging Face cache is."""
    from advisor.introspect.hub import cache_folder
    from advisor.introspect.run import TaskInput, introspect

    cache = cache_folder(environ) if environ is not None else None
    table = introspect(
        description.model,
        description.input_shape,
        description.model_kwargs,
        allow_factories=allow_factories,
        given=TaskInput(description.sequence_length, description.task, description.target_length),
        places=() if cache is None else (cache,),
    )
    return table.trained(training_of(description))


def training_of(description: JobDescription) -> TrainingSettings:
    """What the job's script says of how it trains (LoRA, checkpointing, ZeRO, its optimizer)."""
    from advisor.introspect.table import TrainingSettings

    return TrainingSettings(
        lora_rank=description.lora_rank,
        lora_targets=description.lora_targets,
        checkpointing=description.gradient_checkpointing,
        zero_stage=description.zero_stage,
        hybrid_shard=description.hybrid_shard,
        optimizer=None if description.optimizer == "sgd" else description.optimizer,  # as benchmarked
    )


def daemon_table(description: JobDescription, sent: Mapping[str, Any] | None) -> LayerTable | None:
    """The daemon's table of a job's model: the one sent (built in the user's process; validated), else
    one built here from library code only; None for what only the user's process may build."""
    from advisor.introspect.table import LayerTable

    if sent is not None:  # how the job trains is the daemon's own reading of the script
        return LayerTable.model_validate(sent).trained(training_of(description))
    if not_built_here(description.model) is not None:
        return None
    return table_for(description, allow_factories=False)


def not_built_here(model: str) -> str | None:
    """Why the daemon does not build ``model`` itself, in words; None where it does: a torchvision name,
    ``timm:NAME`` and an ``hf:NAME`` of the shipped table are library code (with the packages installed)."""
    prefix, _, name = model.partition(":")
    if prefix not in ("hf", "timm"):
        return None if not name else f"{model} is your own code and was not run here"
    if importlib.util.find_spec("timm" if prefix == "timm" else "transformers") is None:
        return f"{model} needs advisor[models] beside the daemon, which lacks it"
    from advisor.introspect.hub import shipped_architecture

    if prefix == "hf" and shipped_architecture(name) is None:
        return (
            f"{model} is not one of the advisor's well-known architectures: its config.json is read in "
            "your own process, not here"
        )
    return None
