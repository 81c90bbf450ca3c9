"""The table's FLOPs are exactly what torch's FlopCounterMode counts for a real training step on CPU."""

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
def test_flops_equal_flop_counter_on_a_real_step(
    name: str, shape: tuple[int, int, int], kwargs: dict[str, Any]
) -> None:
    costs = introspect(name, shape, kwargs, allow_factories=False).at_batch(BATCH)
    assert (costs.total.forward_flops, costs.total.backward_flops) == real_step_flops(name, shape, kwargs)


def test_mobilenet_v2_has_17_depthwise_convolutions() -> None:
    table = introspect("mobilenet_v2", (3, 224, 224), allow_factories=False)
    depthwise = [layer for layer in table.layers if layer.depthwise]
    assert len(depthwise) == 17
    assert all(layer.kind is LayerKind.CONV and not layer.grouped for layer in depthwise)
    first = depthwise[0]
    assert first.window is not None
    assert (first.window.kernel, first.window.groups, first.window.channels) == ((3, 3), 32, (32, 32))
