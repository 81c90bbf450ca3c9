"""The layer table as data: JSON round trip, tampering refused, batch scaling, hash, cache, memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from advisor.introspect import LayerTable, Optimizer, estimate_peak_memory
from advisor.introspect.memory import optimizer_state_bytes
from advisor.introspect.run import introspect
from advisor.precision import Precision

REPO = Path(__file__).resolve().parent.parent
FACTORY = "tests.factories.cnn:build"


@pytest.fixture(scope="module")
def table() -> LayerTable:
    return introspect(FACTORY, (3, 32, 32), {"width": 8, "depth": 2}, allow_factories=True)


def test_json_round_trip(table: LayerTable) -> None:
    assert LayerTable.model_validate_json(table.model_dump_json()) == table


def tampered(table: LayerTable, edit: Any) -> str:
    data = json.loads(table.model_dump_json())
    edit(data)
    return json.dumps(data)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["layers"][0]["forward_flops"].update(per_sample=1), "totals do not match the layers"),
        (lambda d: d["layers"][0].update(parameters=-5), "greater than or equal to 0"),
        (lambda d: d["totals"].update(parameters=1), "layers hold more parameters than the model"),
        (lambda d: d["totals"]["backward_flops"].update(fixed=10**12), "totals do not match the layers"),
        # An edit that keeps the totals right is caught by the hash.
        (lambda d: d["layers"][0]["outputs"][0].update(dims=[1, 9, 32, 32]), "architecture hash"),
        (lambda d: d["layers"].reverse(), "layer indices"),
        (lambda d: d["layers"][0]["window"].update(groups=3), "not divisible by groups"),
        (lambda d: d["layers"][0].update(kind="quantum"), "Input should be"),
        (lambda d: d["layers"][0].update(extra=1), "Extra inputs are not permitted"),
        (lambda d: d.update(input_shape=[3, 32]), "input_shape"),
        (lambda d: d["layers"][0]["bytes_read"].update(per_sample=10**19), "less than or equal to"),
    ],
)
def test_tampered_tables_are_refused(table: LayerTable, edit: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        LayerTable.model_validate_json(tampered(table, edit))


def test_costs_scale_linearly_with_the_batch(table: LayerTable) -> None:
    one, eight = table.at_batch(1), table.at_batch(8)
    assert eight.total.forward_flops == 8 * one.total.forward_flops
    assert eight.total.backward_flops == 8 * one.total.backward_flops
    head = table.layers[-1]
    # The head's weights are read once per step, whatever the batch.
    assert head.bytes_read.fixed == head.parameters * 4
    assert eight.layers[-1].bytes_read == 8 * head.bytes_read.per_sample + head.bytes_read.fixed
    assert table.layers[0].inputs[0].at_batch(8) == (8, 3, 32, 32)
    with pytest.raises(ValueError, match="batch size must be positive"):
        table.at_batch(0)


@pytest.mark.parametrize("batch", [1, 3, 64])
def test_the_totals_are_what_every_layers_costs_give(table: LayerTable, batch: int) -> None:
    """A plan asks for these without each layer's costs: they must be the figures the layers add up to."""
    assert table.total_at(batch) == table.at_batch(batch).total
    with pytest.raises(ValueError, match="batch size must be positive"):
        table.total_at(0)


def architecture_hash_in_a_new_process(reference: str, kwargs: dict[str, Any]) -> str:
    code = (
        "import json, sys; from advisor.introspect.run import introspect; "
        "print(introspect(sys.argv[1], (3, 32, 32), json.loads(sys.argv[2]), allow_factories=True)"
        ".architecture_hash)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, reference, json.dumps(kwargs)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout.strip()


def test_architecture_hash_is_stable_across_processes(table: LayerTable) -> None:
    assert architecture_hash_in_a_new_process(FACTORY, {"width": 8, "depth": 2}) == table.architecture_hash


def test_architecture_hash_changes_with_one_layer(table: LayerTable) -> None:
    wider_head = introspect(
        FACTORY, (3, 32, 32), {"width": 8, "depth": 2, "num_classes": 11}, allow_factories=True
    )
    other_shape = introspect(FACTORY, (3, 16, 16), {"width": 8, "depth": 2}, allow_factories=True)
    hashes = {table.architecture_hash, wider_head.architecture_hash, other_shape.architecture_hash}
    assert len(hashes) == 3


def test_a_repeated_request_is_answered_from_the_cache(table: LayerTable) -> None:
    again = introspect(FACTORY, (3, 32, 32), {"depth": 2, "width": 8}, allow_factories=True)
    assert again is table


def test_optimizer_state() -> None:
    assert optimizer_state_bytes(1000, Optimizer.SGD) == 4000
    assert optimizer_state_bytes(1000, Optimizer.ADAM) == optimizer_state_bytes(1000, Optimizer.ADAMW) == 8000


def test_peak_memory_grows_with_the_batch_and_shrinks_with_autocast(table: LayerTable) -> None:
    fp32 = [estimate_peak_memory(table, n, Precision.FP32, Optimizer.ADAMW) for n in (1, 64)]
    bf16 = estimate_peak_memory(table, 64, Precision.BF16, Optimizer.ADAMW)
    assert fp32[0].total < fp32[1].total
    assert bf16.activations < fp32[1].activations
    assert bf16.total < fp32[1].total
    parameters = table.totals.parameters
    assert (fp32[1].weights, fp32[1].gradients, fp32[1].optimizer_state) == (4 * parameters,) * 2 + (
        8 * parameters,
    )
    assert fp32[1].activations == table.totals.saved_activation_bytes.at(64)
