"""A machine's layer fit keeps a booster per timed family: what a convolution does on a tiny map (a slow
kernel path) must not price a matrix product whose rows happen to number the same."""

from __future__ import annotations

from itertools import product

import pytest

from advisor.ops import op_of
from advisor.ops.configs import dense_convolutions, linears
from advisor.predict.features import layer_bytes, layer_flops
from advisor.predict.machine import LayerSample, MachineModel, fit_layers
from advisor.records import LayerConfig


def _law(config: LayerConfig) -> float:
    """Seconds a layer takes by its arithmetic and bytes alone."""
    return 2e-5 + layer_flops(config) * 3e-11 + layer_bytes(config) * 4e-10


def _convolution(width: int, side: int, batch: int) -> LayerConfig:
    """A dense 1x1 convolution, ``width`` channels in and out, on a map of ``side``."""
    (convolution,) = dense_convolutions((1,), (width,), (side,), most=width * side)
    return convolution.model_copy(update={"batch": batch})


BATCHES = (1, 2, 8, 16, 128)


def _samples() -> list[LayerSample]:
    """1x1 convolutions three times their law on maps of 1 or 2 px below batch 16 (as ``_slow_conv2d`` runs
    on a CPU); linears as wide on their law over 16 and 64 tokens, never fewer."""
    convolutions = [
        _convolution(width, side, batch)
        for width, side, batch in product((128, 256, 512), (1, 2, 4, 8), BATCHES)
    ]
    slow = [LayerSample(c, _law(c) * (3.0 if c.height <= 2 and c.batch < 16 else 1.0)) for c in convolutions]
    matrices = [
        c.model_copy(update={"batch": batch})
        for c, batch in product(linears((128, 256, 512), (16, 64), most=2**24), BATCHES)
    ]
    return slow + [LayerSample(c, _law(c)) for c in matrices]


def test_a_linear_over_four_tokens_is_priced_by_linears_not_by_tiny_maps() -> None:
    """Within a quarter of its law (1.17 and 1.05 times it at batches 2 and 8), where one booster for both
    families priced it at 3.0 times (tried)."""
    model = fit_layers("m", _samples())
    assert model.matrix_booster and model.layer_booster
    (unseen,) = linears((256,), (4,), most=2**24)
    for batch in (2, 8):
        at = unseen.model_copy(update={"batch": batch})
        assert model.layer_seconds([at])[at] == pytest.approx(_law(at), rel=0.25)


def test_a_machine_without_matrix_products_measured_prices_them_by_its_one_booster() -> None:
    convolutions = [s for s in _samples() if op_of(s.config).family == "convolution"]
    model = fit_layers("m", convolutions)
    assert model.matrix_booster == "" and model.layer_booster
    (linear,) = linears((256,), (4,), most=2**24)
    assert model.layer_seconds([linear])[linear] > 0


def test_a_version_from_before_the_matrix_booster_reads_and_prices_with_its_one_booster() -> None:
    model = fit_layers("m", _samples())
    older = MachineModel.model_validate(model.model_dump(exclude={"matrix_booster"}))
    (linear,) = linears((256,), (4,), most=2**24)
    single = model.model_copy(update={"matrix_booster": ""})
    assert older.matrix_booster == ""
    assert older.layer_seconds([linear]) == single.layer_seconds([linear])
