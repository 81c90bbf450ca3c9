"""The entry point: a model reference and an input shape in, a validated layer table out, cached in the
process and, for torchvision models, on disk where the command named a folder (`table_cache`).

The table comes from one training step on the meta device: no memory, no GPU, no weights.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache

from pydantic import JsonValue

from advisor.introspect.errors import IntrospectionError, summary
from advisor.introspect.probe import run_probe
from advisor.introspect.reference import build_model
from advisor.introspect.table import LayerTable
from advisor.introspect.table_cache import read_table, table_folder, table_key, write_table

_MAX_SIDE = 16384
CACHE_SIZE = 128


def introspect(
    reference: str,
    input_shape: tuple[int, int, int] = (3, 224, 224),
    kwargs: Mapping[str, JsonValue] | None = None,
    *,
    allow_factories: bool,
) -> LayerTable:
    """The layer table of ``reference`` built with ``kwargs``, for one sample of ``input_shape`` (C, H, W).

    ``allow_factories`` is the security boundary: False (the daemon) accepts only torchvision
    classification model names; True (the user's own process) also imports ``package.module:factory``.
    """
    shape = tuple(input_shape)
    if len(shape) != 3 or not all(isinstance(side, int) and 0 < side <= _MAX_SIDE for side in shape):
        raise IntrospectionError(f"input shape must be three positive sizes (C, H, W), not {input_shape}")
    try:
        canonical = json.dumps(dict(kwargs or {}), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise IntrospectionError(f"model arguments must be JSON values: {error}") from error
    return _introspect(reference, canonical, (shape[0], shape[1], shape[2]), allow_factories)


@lru_cache(maxsize=CACHE_SIZE)
def _introspect(
    reference: str, kwargs_json: str, input_shape: tuple[int, int, int], allow_factories: bool
) -> LayerTable:
    folder = None if allow_factories else table_folder()
    if folder is None:
        return _built(reference, kwargs_json, input_shape, allow_factories)
    key = table_key(reference, kwargs_json, input_shape)
    table = read_table(folder, key)
    if table is None:
        table = _built(reference, kwargs_json, input_shape, allow_factories)
        write_table(folder, key, table)
    return table


def _built(
    reference: str, kwargs_json: str, input_shape: tuple[int, int, int], allow_factories: bool
) -> LayerTable:
    kwargs: dict[str, JsonValue] = json.loads(kwargs_json)
    model = build_model(reference, kwargs, allow_factories=allow_factories)
    try:
        probe = run_probe(model, input_shape)
    except IntrospectionError as error:
        raise IntrospectionError(f"{reference!r}: {error}") from error
    except Exception as error:
        shape = "x".join(map(str, input_shape))
        raise IntrospectionError(f"{reference!r} rejects input shape {shape}: {summary(error)}") from error
    return LayerTable.build(
        reference, kwargs, input_shape, probe.layers, probe.parameters, probe.saved_activation_bytes
    )


def clear_cache() -> None:
    """Forget every cached table (benchmarks measure the uncached path with it)."""
    _introspect.cache_clear()
