"""The daemon's step predictor at its edges: what the all-reduce of a data-parallel step carries."""

from __future__ import annotations

import pytest

from advisor.comm.sync import Communication, Link, Spread
from advisor.introspect import Layer, LayerKind, LayerTable, Scaling, TensorShape
from advisor.introspect.table import Probe, TrainingSettings
from advisor.predict.service import Predictors
from advisor.recommend.edges import StoredModels
from advisor.store import Store

SLOW = Link(latency_s=0.0, latency_per_device_s=0.0, bus_bytes_s=1e6)
"""A megabyte a second and no latency, so the all-reduce's seconds count its bytes."""
APART = Communication(node=SLOW, network=SLOW, overlap=1.0, measured=True)
"""Overlap 1: the step is its compute plus the all-reduce, nothing hidden."""


def _one_linear() -> LayerTable:
    """One 10 -> 20 linear: 200 parameters; LoRA of rank 2 on it adapts 2 x (10 + 20) = 60."""
    flops = 2 * 10 * 20
    layer = Layer(
        index=0, name="fc", op="Linear", kind=LayerKind.LINEAR,
        inputs=(TensorShape(dims=(1, 10), batch_dim=0),), outputs=(TensorShape(dims=(1, 20), batch_dim=0),),
        parameters=200, forward_flops=Scaling(per_sample=flops), backward_flops=Scaling(per_sample=2 * flops),
        bytes_read=Scaling(), bytes_written=Scaling(),
    )  # fmt: skip
    return LayerTable.build("lab.nets:one", {}, (3, 8, 8), Probe((layer,), 200, Scaling(per_sample=80)))


LORA = TrainingSettings(lora_rank=2, lora_targets=("fc",))


@pytest.mark.parametrize(("training", "parameters"), [(None, 200), (LORA, 60)])
def test_only_the_trained_parameters_gradients_are_all_reduced(
    training: TrainingSettings | None, parameters: int
) -> None:
    """Four devices: a ring carries 2 x 3/4 of the float32 gradients, 1.5 x 4 bytes a parameter: 1,200 B
    (1.2 ms) for the whole linear, 360 B (0.36 ms) for its adapters alone."""
    table = _one_linear().trained(training)
    models = StoredModels(Store.memory(), Predictors([], {}, {}), [], table, [], {"a100": APART})
    added = models.sync("a100", Spread(devices=4, nodes=1), micro_step_s=0.5).added_s
    assert added == pytest.approx(1.5 * 4 * parameters / 1e6)
