"""A machine's layer boosters: one for the convolutions and one for the matrix products (linears, matmuls,
attention) where both were measured. One booster for both let a 1x1 convolution's slow path on a 1-2 px
map (``_slow_conv2d`` below batch 16) price a linear over as few tokens at several times its time: no
linear in the grid has 2-8 rows a sample, so the trees answered from the convolutions (benchmarks/README.md,
issue 51)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import log

from advisor.ops import op_of
from advisor.predict.boosters import LAYER_PARAMS, LAYER_ROUNDS, apply_booster, train_booster
from advisor.predict.features import layer_features
from advisor.records import LayerConfig

Base = Callable[[LayerConfig], float]
"""A layer's base seconds, which its booster's ratio multiplies."""


def is_matrix(config: LayerConfig) -> bool:
    return op_of(config).family == "matrix"


def trained_boosters(base_s: Base, layers: Sequence[tuple[LayerConfig, float]]) -> tuple[str, str]:
    """(the layer booster, the matrix products' booster) of measured ``(layer, seconds)``: the second empty
    where either family was not measured, the first then every layer's."""
    products = [layer for layer in layers if is_matrix(layer[0])]
    rest = [layer for layer in layers if not is_matrix(layer[0])]
    if not (products and rest):
        return _booster(base_s, layers), ""
    return _booster(base_s, rest), _booster(base_s, products)


def _booster(base_s: Base, layers: Sequence[tuple[LayerConfig, float]]) -> str:
    """A booster of ``layers``' log ratios to their base."""
    ratios = [log(seconds) - log(base_s(config)) for config, seconds in layers]
    return train_booster(LAYER_PARAMS, LAYER_ROUNDS, [layer_features(c) for c, _ in layers], ratios)


def family_ratios(layer_booster: str, matrix_booster: str, configs: Sequence[LayerConfig]) -> list[float]:
    """Each layer's log ratio to its base, from its family's booster (``layer_booster`` for all where
    ``matrix_booster`` is empty: a version from before it, or a machine that measured one family)."""
    ratios: dict[int, float] = {}
    for matrix in (False, True):
        indices = [i for i, c in enumerate(configs) if is_matrix(c) is matrix]
        booster = matrix_booster if matrix and matrix_booster else layer_booster
        if indices:
            found = apply_booster(booster, [layer_features(configs[i]) for i in indices])
            ratios.update(zip(indices, found, strict=True))
    return [ratios[i] for i in range(len(configs))]
