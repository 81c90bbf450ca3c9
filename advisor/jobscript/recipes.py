"""The files a training command names, read as flags: its recipe (``--config recipe.yaml``, a positional
YAML or JSON as Hugging Face's argument parser takes one, nanoGPT's Python config as its first argument,
its literal assignments only, torchtitan's TOML), ``accelerate launch --config_file``'s YAML, and a
DeepSpeed JSON (``--deepspeed ds.json``, or the one accelerate's file names).

Nested keys become dotted flags (Lightning's ``trainer: {max_steps: 10}`` is ``--trainer.max_steps 10``,
``init_args`` levels dropped; a list of mappings numbers them: ``datasets.0.path``), ``_`` spelt ``-`` as the
command line's are; accelerate's keys are kept
under ``accelerate.``, DeepSpeed's under ``deepspeed.``. The command line's own flags win over a recipe.
Reading is the caller's (``read``: the user's process reads the user's files; the daemon reads none), so
this stays pure; a file that cannot be read is named, not guessed.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from advisor.jobscript.launchers import ACCELERATE, UNKNOWN, accelerate_flags
from advisor.jobscript.nanogpt import config_assignments

Read = Callable[[str], str | None]
"""A path as the command names it, to its text; None where it cannot be read here."""
_RECIPE_ENDINGS = (".yaml", ".yml", ".json")
ACCELERATE_DEFAULT = "~/.cache/huggingface/accelerate/default_config.yaml"


@dataclass
class Recipe:
    """Flags from files, and which files were read or not."""

    values: dict[str, str] = field(default_factory=dict)
    read: list[str] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ScriptFiles:
    """What the script itself says of the files its command reads: those it wrote before it (its
    here-documents, read first), and where its environment puts accelerate's default config."""

    written: Read = lambda name: None
    accelerate_default: str = ACCELERATE_DEFAULT


def accelerate_default(variables: Mapping[str, str | None]) -> str:
    """Where ``accelerate launch`` looks for its default config under the script's variables, as accelerate
    and huggingface_hub find their cache: ``$HF_HOME``, else ``$XDG_CACHE_HOME/huggingface``, else
    ``~/.cache/huggingface``; a folder only the run names, `UNKNOWN`."""
    for name, under in (("HF_HOME", ""), ("XDG_CACHE_HOME", "/huggingface")):
        if name in variables:
            home = variables[name]
            return f"{UNKNOWN if home is None else home.rstrip('/')}{under}/accelerate/default_config.yaml"
    return ACCELERATE_DEFAULT


def recipe_flags(
    flags: Mapping[str, str],
    positional: Sequence[str],
    launcher: Mapping[str, str],
    read: Read | None,
    script: ScriptFiles = ScriptFiles(),
) -> Recipe:
    """The flags the command's files set; ``flags`` are the program's own (they name the files)."""
    recipe, written = Recipe(), script.written
    names = [flags[key] for key in ("config", "config-file", "recipe", "job.config-file") if flags.get(key)]
    names += [word for word in positional if word.endswith(_RECIPE_ENDINGS)]
    names += positional[:1] if positional and positional[0].endswith(".py") else []  # nanoGPT's config
    for name in names:
        recipe.values |= _flattened(_load(name, read, recipe, written))
    accelerate_file = launcher.get("config-file")
    if accelerate_file or ACCELERATE in launcher:
        default = script.accelerate_default
        found = (
            _load(accelerate_file, read, recipe, written)
            if accelerate_file
            else _default(default, read, recipe, written)
        )
        settings = _flattened(found)
        recipe.values |= {f"accelerate.{key}": value for key, value in settings.items()}
    recipe.values |= accelerate_flags(launcher)  # accelerate's command line wins over its file
    speed_file = (
        flags.get("deepspeed")
        or recipe.values.get("deepspeed")
        or recipe.values.get("accelerate.deepspeed-config.deepspeed-config-file")
    )
    if speed_file and speed_file.endswith(".json"):
        settings = _flattened(_load(speed_file, read, recipe, written))
        recipe.values |= {f"deepspeed.{key}": value for key, value in settings.items()}
    return recipe


def _default(name: str, read: Read | None, recipe: Recipe, written: Read) -> object:
    """accelerate's default config (``accelerate config`` writes it), which ``accelerate launch`` reads
    where no ``--config_file`` is given: read where it is, nothing said where it is not (most have none),
    said where the script's ``HF_HOME`` is known only when it runs; one the script writes, read."""
    if UNKNOWN in name or written(name) is not None:
        return _load(name, read, recipe, written)
    text = None if read is None else read(name)
    return {} if text is None else _load(name, lambda _: text, recipe, written)


def _load(name: str, read: Read | None, recipe: Recipe, written: Read) -> object:
    """The file ``name``'s settings: the script's own here-document of that name first (``written``)."""
    text = written(name)
    if text is not None:
        return _loaded(name, text.replace(UNKNOWN, _RUN_TIME), recipe)
    if UNKNOWN in name:
        recipe.unread.append(f"{name.replace(UNKNOWN, '?')} (named only when the job runs)")
        return {}
    text = None if read is None else read(name)
    if text is None:
        recipe.unread.append(
            name if read is not None else f"{name} (the advisor's daemon reads no user's file)"
        )
        return {}
    return _loaded(name, text, recipe)


def _loaded(name: str, text: str, recipe: Recipe) -> object:
    shown = name.replace(UNKNOWN, "?")
    try:
        data = _parsed(name, text)
    except ImportError:
        recipe.unread.append(f"{shown} (PyYAML is not installed)")
        return {}
    except (ValueError, tomllib.TOMLDecodeError) as error:
        recipe.unread.append(f"{shown} ({error})")
        return {}
    recipe.read.append(shown)
    return data


def _parsed(name: str, text: str) -> object:
    """A file's settings by its kind: JSON, TOML (torchtitan's), a Python config's literals, else YAML."""
    if name.endswith(".json"):
        return json.loads(text)
    if name.endswith(".toml"):
        return tomllib.loads(text)
    return config_assignments(text) if name.endswith(".py") else _yaml(text)


def _yaml(text: str) -> object:
    """Safe YAML (transformers' own requirement: a base install names the file it could not read)."""
    import yaml  # type: ignore[import-untyped]  # no stubs installed

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        problem = getattr(error, "problem", None) or "not YAML"
        mark = getattr(error, "problem_mark", None)
        raise ValueError(f"line {mark.line + 1}: {problem}" if mark else str(problem)) from None


def _flattened(data: object, prefix: str = "") -> dict[str, str]:
    if not isinstance(data, dict):
        return {}
    flat: dict[str, str] = {}
    for raw_key, value in data.items():
        key = str(raw_key).replace("_", "-")
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat |= _flattened(value, prefix if key == "init-args" else f"{name}.")
        elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            for position, item in enumerate(value):  # axolotl's datasets: [{path: ...}]
                flat |= _flattened(item, f"{name}.{position}.")
        elif value is not None and name:
            flat[name] = _text(value)
    return flat


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_text(item) for item in value)
    return str(value).replace(_RUN_TIME, UNKNOWN)


_RUN_TIME = "\ue000"
"""`UNKNOWN` in a here-document's text while it is parsed (YAML refuses the NUL character; a private-use
character it takes), `UNKNOWN` again in the values it gives."""
