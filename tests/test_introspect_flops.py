"""The table's FLOPs: by hand for small convolutions, and what torch's FlopCounterMode counts for a real
training step wherever its formulas are right (forward; backward of models without grouped convolutions)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torchvision
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from advisor.introspect import LayerKind
from advisor.introspect.run import introspect

BATCH = 2


def real_step_flops(name: str, shape: tuple[int, int, int], kwargs: dict[str, Any]) -> tuple[int, int]:
    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None, **kwargs).train()
    x = torch.randn(BATCH, *shape)
    # FlopCounterMode has no formula for the CPU flash-attention kernel, so the math path is the reference.
    with sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as forward:
            output = model(x)
        with FlopCounterMode(display=False) as backward:
            torch.autograd.backward([t.sum() for t in tree_leaves(output) if isinstance(t, torch.Tensor)])
    return forward.get_total_flops(), backward.get_total_flops()


@pytest.mark.parametrize(
    ("name", "shape", "kwargs"),
    [
        ("resnet18", (3, 64, 64), {}),
        ("mobilenet_v2", (3, 64, 64), {"num_classes": 10}),
        ("vit_b_16", (3, 32, 32), {"image_size": 32}),
        ("swin_t", (3, 64, 64), {}),
    ],
)
def test_forward_flops_equal_flop_counter_on_a_real_step(
    name: str, shape: tuple[int, int, int], kwargs: dict[str, Any]
) -> None:
    costs = introspect(name, shape, kwargs, allow_factories=False).at_batch(BATCH)
    assert costs.total.forward_flops == real_step_flops(name, shape, kwargs)[0]


@pytest.mark.parametrize(
    ("name", "shape", "kwargs"),
    [
        ("resnet18", (3, 64, 64), {}),
        ("vit_b_16", (3, 32, 32), {"image_size": 32}),
        ("swin_t", (3, 64, 64), {}),
    ],
)
def test_backward_flops_equal_flop_counter_where_no_convolution_is_grouped(
    name: str, shape: tuple[int, int, int], kwargs: dict[str, Any]
) -> None:
    costs = introspect(name, shape, kwargs, allow_factories=False).at_batch(BATCH)
    assert costs.total.backward_flops == real_step_flops(name, shape, kwargs)[1]


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet18", "shufflenet_v2_x0_5"])
def test_a_cnns_backward_is_twice_its_forward_less_the_first_layers_input_gradient(name: str) -> None:
    """Every convolution and linear layer computes two gradients of its forward's cost, but the first, whose
    input (the images) needs none. torch 2.14 counts mobilenet_v2's backward 9.9x too high."""
    table = introspect(name, (3, 224, 224), allow_factories=False)
    costs = table.at_batch(2)
    first = next(layer for layer in table.layers if layer.kind is LayerKind.CONV).at_batch(2)
    assert costs.total.backward_flops == 2 * costs.total.forward_flops - first.forward_flops
    if name == "mobilenet_v2":
        assert 3.5e9 < costs.total.train_flops < 3.7e9, "about 3.6 G, not 24.6 G"


@pytest.mark.parametrize(
    ("layer", "forward"),
    [
        # 2 x batch x C_out x (C_in / groups) x kernel area x output positions, by hand:
        ({"channels_in": 4, "channels_out": 8, "kernel": 3, "groups": 2}, 2 * 8 * 2 * 9 * 8 * 8),
        ({"channels_in": 8, "channels_out": 8, "kernel": 3, "groups": 8}, 2 * 8 * 1 * 9 * 8 * 8),
        ({"channels_in": 3, "channels_out": 4, "kernel": 3, "dilation": 2}, 2 * 4 * 3 * 9 * 6 * 6),
        ({"channels_in": 3, "channels_out": 4, "kernel": 3, "stride": 2}, 2 * 4 * 3 * 9 * 4 * 4),
        # transposed: 2 x batch x C_in x (C_out / groups) x kernel area x input positions
        (
            {"channels_in": 4, "channels_out": 6, "kernel": 3, "stride": 2, "groups": 2, "transposed": True},
            2 * 4 * 3 * 9 * 10 * 10,
        ),
    ],
)
def test_a_convolutions_flops_are_the_hand_count(layer: dict[str, Any], forward: int) -> None:
    table = introspect("tests.factories.cnn:one_convolution", (3, 10, 10), layer, allow_factories=True)
    stem, conv = (
        row.at_batch(1) for row in table.layers if row.kind in (LayerKind.CONV, LayerKind.CONV_TRANSPOSE)
    )
    assert conv.forward_flops == forward
    assert conv.backward_flops == 2 * forward, "the input's gradient and the weight's, each as the forward"
    assert stem.backward_flops == stem.forward_flops == 2 * 3 * layer["channels_in"] * 100, (
        "no image gradient"
    )


def test_mobilenet_v2_has_17_depthwise_convolutions() -> None:
    table = introspect("mobilenet_v2", (3, 224, 224), allow_factories=False)
    depthwise = [layer for layer in table.layers if layer.depthwise]
    assert len(depthwise) == 17
    assert all(layer.kind is LayerKind.CONV and not layer.grouped for layer in depthwise)
    first = depthwise[0]
    assert first.window is not None
    assert (first.window.kernel, first.window.groups, first.window.channels) == ((3, 3), 32, (32, 32))
