"""Where a Hugging Face model's configuration is found without a network: the places a user keeps models,
then the advisor's table of well-known architectures (``advisor/data/architectures.toml``).

In the user's own process (``places`` given): a folder holding a ``config.json``
(``--model_name_or_path /scratch/models/llama``), then the user's Hugging Face cache
(``models--ORG--NAME/snapshots/*/config.json``: the snapshot ``refs/main`` names, else the newest). The
daemon passes no places: only the shipped table, never a file a user names. Only JSON is read here; the
model is built from it by transformers' own config classes (`advisor.introspect.builders`), never with
remote code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, JsonValue, RootModel, StringConstraints

from advisor.frozen import Frozen
from advisor.introspect.errors import IntrospectionError
from advisor.introspect.table import Task
from advisor.tomlfile import TomlFileError, parse_model

_SHIPPED = "advisor/data/architectures.toml"
_MAX_CONFIG_BYTES = 2**20
"""A config.json is a few kilobytes; anything near a megabyte is not one."""


class Architecture(Frozen):
    model_type: Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]+$")]
    task: Task
    aliases: tuple[str, ...] = ()
    config: dict[str, JsonValue] = Field(default_factory=dict)


class _Table(RootModel[dict[str, Architecture]]):
    pass


class ArchitecturesFileError(TomlFileError):
    """The shipped table does not validate (a packaging defect)."""


@dataclass(frozen=True)
class FoundConfig:
    """A configuration as config.json spells it (``model_type`` included), and where it came from."""

    values: dict[str, Any]
    place: str
    task: Task | None = None
    """What the shipped table says the name is trained for; None for a user's file."""


def cache_folder(environ: Mapping[str, str]) -> Path | None:
    """The Hugging Face hub cache as huggingface_hub finds it: ``HF_HUB_CACHE``, ``HF_HOME/hub``,
    ``XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub`` (None without a home)."""
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"]).expanduser()
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]).expanduser() / "hub"
    if environ.get("XDG_CACHE_HOME"):
        return Path(environ["XDG_CACHE_HOME"]) / "huggingface" / "hub"
    home = environ.get("HOME")
    return Path(home) / ".cache" / "huggingface" / "hub" if home else None


def find_config(name: str, places: Sequence[Path] | None) -> FoundConfig:
    """``name``'s configuration: a folder, then each cache in ``places``, then the shipped table."""
    if places is not None:
        folder = Path(name).expanduser()
        if (folder / "config.json").is_file():
            return _read(folder / "config.json")
        for cache_root in places:
            found = _cached(cache_root, name)
            if found is not None:
                return _read(found)
    shipped = shipped_architecture(name)
    if shipped is not None:
        return FoundConfig({"model_type": shipped.model_type, **shipped.config}, _SHIPPED, shipped.task)
    looked = "the advisor's table of well-known architectures"
    if places is not None:
        looked = f"a folder of that name, the Hugging Face cache ({', '.join(map(str, places))}) or {looked}"
    raise IntrospectionError(f"no config.json for {name!r} in {looked}: give a folder with its config.json")


def shipped_architecture(name: str) -> Architecture | None:
    """The shipped entry for a name or alias, without regard to case; else for the part after its
    organisation (``unsloth/Llama-3.2-1B`` is Llama 3.2 1B)."""
    names = _names()
    lowered = name.lower()
    return names.get(lowered) or names.get(lowered.rsplit("/", 1)[-1])


def class_defaults(model_type: str) -> str | None:
    """The shipped name whose configuration is its class's defaults (``bert``: bert-base-uncased), where
    one is; a model trained from scratch with ``--model_type`` has that configuration."""
    names = _names()
    return next(
        (name for name, found in names.items() if found.model_type == model_type and not found.config), None
    )


@cache
def _names() -> dict[str, Architecture]:
    text = (resources.files("advisor") / "data" / "architectures.toml").read_text(encoding="utf-8")
    table = parse_model(text, _SHIPPED, _Table, ArchitecturesFileError).root
    names: dict[str, Architecture] = {}
    for name, architecture in table.items():
        for alias in (name, *architecture.aliases):
            names[alias.lower()] = architecture
            names.setdefault(alias.lower().rsplit("/", 1)[-1], architecture)
    return names


def _cached(cache_root: Path, name: str) -> Path | None:
    """The cache's config.json of ``ORG/NAME``: the snapshot ``refs/main`` points at, else the newest."""
    if name.count("/") > 1 or name.startswith((".", "/", "~")):
        return None
    repository = cache_root / f"models--{name.replace('/', '--')}"
    try:
        main = (repository / "refs" / "main").read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        main = ""
    if main and (repository / "snapshots" / main / "config.json").is_file():
        return repository / "snapshots" / main / "config.json"
    found = [path for path in (repository / "snapshots").glob("*/config.json") if path.is_file()]
    return max(found, key=lambda path: path.stat().st_mtime, default=None)


def _read(path: Path) -> FoundConfig:
    try:
        with path.open("rb") as file:
            data = file.read(_MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise IntrospectionError(f"cannot read {path}: {error.strerror}") from None
    if len(data) > _MAX_CONFIG_BYTES:
        raise IntrospectionError(f"{path} is over {_MAX_CONFIG_BYTES} bytes: not a model's config.json")
    try:
        values = json.loads(data)
    except ValueError as error:
        raise IntrospectionError(f"{path} is not JSON: {error}") from None
    if not isinstance(values, dict) or not isinstance(values.get("model_type"), str):
        raise IntrospectionError(f"{path} names no model_type: not a transformers config.json")
    return FoundConfig(values, str(path))


def timm_input_side(name: str) -> int | None:
    """The side timm's train.py trains ``name`` at where no ``--img-size`` says: its registry's pretrained
    configuration's (efficientnet_b2 256, tf_efficientnet_b4 380, most 224), to which it resizes any
    dataset, CIFAR's too. None where timm is not installed or does not know the name."""
    try:
        from timm.models import get_pretrained_cfg
    except ImportError:
        return None
    try:
        found = get_pretrained_cfg(name)
    except (RuntimeError, ValueError):
        return None
    size = getattr(found, "input_size", None)
    return size[-1] if isinstance(size, tuple) and size and isinstance(size[-1], int) else None
