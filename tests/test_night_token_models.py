"""A submitted token model (or one transformers or timm builds) gets its layers measured, never a whole
step: a benchmark step builds torchvision names on images only (pure; fake tables)."""

from __future__ import annotations

import pytest

from advisor.bench.night import architecture_layers, step_measurable, whole_steps
from advisor.bench.plan import DeviceProfile, nightly_grid
from advisor.introspect import LayerTable
from advisor.introspect.table import Probe, Task
from advisor.records import LayerConfig, StepConfig
from tests.plan_support import fake_table

GRID = nightly_grid("cuda")
DEVICE = DeviceProfile.assumed("cuda", memory_bytes=80 * 2**30)


def _as(reference: str, sequence_length: int | None) -> LayerTable:
    image = fake_table("model", 32)
    totals = image.totals
    task = None if sequence_length is None else Task.CAUSAL_LM
    probe = Probe(image.layers, totals.parameters, totals.saved_activation_bytes)
    return LayerTable.build(reference, {}, image.input_shape, probe, sequence_length, task)


@pytest.mark.parametrize(
    ("reference", "tokens"), [("hf:gpt2", 128), ("timm:resnet50d", None), ("lab.nets:lm", 64)]
)
def test_a_model_no_benchmark_step_builds_gets_layers_only(reference: str, tokens: int | None) -> None:
    table = _as(reference, tokens)
    layers = architecture_layers(GRID, DEVICE, table)
    assert layers and all(isinstance(item.config, LayerConfig) for item in layers)
    assert whole_steps(GRID, DEVICE, table, (4, 16)) == []
    assert not step_measurable(table)


def test_a_torchvision_image_model_still_gets_its_whole_steps() -> None:
    steps = [item.config for item in whole_steps(GRID, DEVICE, _as("resnet18", None), (16, 4, 4))]
    assert all(isinstance(config, StepConfig) for config in steps)
    assert [config.batch for config in steps] == [4, 16]
