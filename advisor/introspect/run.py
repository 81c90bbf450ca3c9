"""The entry point: a model reference and its input in, a validated layer table out, cached in the
process and, for torchvision models, on disk where the command named a folder (`table_cache`).

The table comes from one training step on the meta device: no memory, no GPU, no weights. The input is an
image of ``input_shape`` (C, H, W), or for a token model (``sequence_length`` given) token ids
``[batch, sequence_length]`` with the labels of its task.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic import JsonValue

from advisor.introspect.builders import build_named, builds_itself, token_limit
from advisor.introspect.errors import IntrospectionError, summary
from advisor.introspect.probe import run_probe
from advisor.introspect.reference import build_model
from advisor.introspect.table import TOKEN_TASKS, LayerTable, Task
from advisor.introspect.table_cache import read_table, table_folder, table_key, write_table

_MAX_SIDE = 16384
_MAX_SEQUENCE = 2**20
CACHE_SIZE = 128


@dataclass(frozen=True)
class TaskInput:
    """What a step computes its loss on (None: the model's own task) and, for a token model, the token ids'
    length and a seq2seq model's target length (None: an image)."""

    sequence_length: int | None = None
    task: Task | str | None = None
    target_length: int | None = None


@dataclass(frozen=True)
class _Inputs:
    """What one sample is, beyond the model: hashable, so the process cache can key on it."""

    shape: tuple[int, int, int]
    sequence_length: int | None = None
    task: Task | None = None
    target_length: int | None = None
    places: tuple[Path, ...] | None = None
    """Where the user keeps Hugging Face models (their process only); None: the shipped table alone."""


def introspect(
    reference: str,
    input_shape: tuple[int, int, int] = (3, 224, 224),
    kwargs: Mapping[str, JsonValue] | None = None,
    *,
    allow_factories: bool,
    given: TaskInput = TaskInput(),
    places: Sequence[Path] = (),
) -> LayerTable:
    """The layer table of ``reference`` built with ``kwargs``, for one sample of ``input_shape`` (C, H, W),
    or of ``given.sequence_length`` token ids.

    ``allow_factories`` is the security boundary: False (the daemon) accepts torchvision classification
    model names, ``timm:NAME`` and ``hf:NAME`` of the shipped architectures only; True (the user's own
    process) also imports ``package.module:factory`` and reads ``hf:`` folders and the caches in
    ``places``.
    """
    sequence_length, task, target_length = given.sequence_length, given.task, given.target_length
    shape = tuple(input_shape)
    if len(shape) != 3 or not all(isinstance(side, int) and 0 < side <= _MAX_SIDE for side in shape):
        raise IntrospectionError(f"input shape must be three positive sizes (C, H, W), not {input_shape}")
    for name, length in (("sequence length", sequence_length), ("target length", target_length)):
        if length is not None and not 0 < length <= _MAX_SEQUENCE:
            raise IntrospectionError(f"{name} must be 1 to {_MAX_SEQUENCE} tokens, not {length}")
    try:
        canonical = json.dumps(dict(kwargs or {}), sort_keys=True, allow_nan=False)
        chosen = None if task is None else Task(task)
    except (TypeError, ValueError) as error:
        raise IntrospectionError(f"model arguments must be JSON values: {error}") from error
    where = tuple(places) if allow_factories else None
    inputs = _Inputs((shape[0], shape[1], shape[2]), sequence_length, chosen, target_length, where)
    return _introspect(reference, canonical, inputs, allow_factories)


@lru_cache(maxsize=CACHE_SIZE)
def _introspect(reference: str, kwargs_json: str, inputs: _Inputs, allow_factories: bool) -> LayerTable:
    folder = None if allow_factories or inputs.sequence_length else table_folder()
    if folder is None:
        return _built(reference, kwargs_json, inputs, allow_factories)
    key = table_key(reference, kwargs_json, inputs.shape)
    table = read_table(folder, key)
    if table is None:
        table = _built(reference, kwargs_json, inputs, allow_factories)
        write_table(folder, key, table)
    return table


def _built(reference: str, kwargs_json: str, inputs: _Inputs, allow_factories: bool) -> LayerTable:
    kwargs: dict[str, JsonValue] = json.loads(kwargs_json)
    task = inputs.task
    if builds_itself(reference):
        model, task = build_named(reference, kwargs, inputs.task, inputs.target_length, inputs.places)
    else:
        model = build_model(reference, kwargs, allow_factories=allow_factories)
    tokens = None if task is Task.IMAGE_CLASSIFICATION else inputs.sequence_length
    if task in TOKEN_TASKS and tokens is None:
        raise IntrospectionError(f"{reference!r} reads token ids ({task}): give its --sequence-length")
    limit = token_limit(model)
    if tokens is not None and limit is not None and tokens > limit:
        raise IntrospectionError(
            f"{reference!r} reads at most {limit} tokens (its learned positions), not {tokens}: give the "
            "length the job trains at (--sequence-length)"
        )
    try:
        probe = run_probe(model, inputs.shape, tokens)
    except IntrospectionError as error:
        raise IntrospectionError(f"{reference!r}: {error}") from error
    except Exception as error:
        given = f"of {tokens} tokens" if tokens else "shape " + "x".join(map(str, inputs.shape))
        raise IntrospectionError(f"{reference!r} rejects input {given}: {summary(error)}") from error
    return LayerTable.build(reference, kwargs, inputs.shape, probe, tokens, task)


def clear_cache() -> None:
    """Forget every cached table (benchmarks measure the uncached path with it)."""
    _introspect.cache_clear()
