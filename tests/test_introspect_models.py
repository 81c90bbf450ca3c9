"""Every architecture of torchvision's classification models introspects at its default input size (the
weights' crop).

A family's variants (resnet18 to resnet152, efficientnet_b0 to b7) are one builder at other widths and
depths, so one of each block design stands for all; a model from a new builder fails the suite until one is
named here.
"""

from __future__ import annotations

import math

import pytest
import torchvision

from advisor.introspect import LayerKind
from advisor.introspect.run import introspect

MODELS = torchvision.models.list_models(module=torchvision.models)
ARCHITECTURES = (
    "alexnet",
    "convnext_tiny",
    "densenet121",
    "efficientnet_b0",
    "efficientnet_v2_s",  # fused MBConv blocks
    "googlenet",
    "inception_v3",
    "maxvit_t",
    "mnasnet0_5",
    "mobilenet_v2",
    "mobilenet_v3_small",
    "regnet_x_400mf",
    "regnet_y_400mf",  # squeeze-and-excitation
    "resnet18",  # basic blocks
    "resnet50",  # bottlenecks
    "resnext50_32x4d",  # grouped
    "shufflenet_v2_x0_5",
    "squeezenet1_0",
    "squeezenet1_1",
    "swin_t",
    "swin_v2_t",  # its position-bias MLP
    "vgg11",
    "vgg11_bn",
    "vit_b_16",
    "vit_h_14",  # at 518 px, its image size passed as an argument
)


def default_case(name: str) -> tuple[tuple[int, int, int], dict[str, int]]:
    """The input size the pretrained weights expect; a ViT needs its image size as an argument as well."""
    weights = torchvision.models.get_model_weights(name).DEFAULT
    crop = int(weights.transforms.keywords["crop_size"])
    kwargs = {"image_size": crop} if name.startswith("vit_") and crop != 224 else {}
    return (3, crop, crop), kwargs


def test_every_builder_of_torchvision_has_an_architecture_here() -> None:
    def builder(name: str) -> str:
        return str(torchvision.models.get_model_builder(name).__module__)

    assert set(ARCHITECTURES) <= set(MODELS)
    assert {builder(name) for name in MODELS} == {builder(name) for name in ARCHITECTURES}


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("name", ARCHITECTURES)
def test_classification_model_introspects(name: str) -> None:
    shape, kwargs = default_case(name)
    table = introspect(name, shape, kwargs, allow_factories=False)
    kinds = {layer.kind for layer in table.layers}
    assert kinds & {LayerKind.CONV, LayerKind.LINEAR}
    assert math.prod(table.layers[-1].outputs[-1].at_batch(1)) == 1000
    assert table.totals.unused_parameters == 0
    assert table.totals.forward_flops.per_sample > 0
    assert table.totals.saved_activation_bytes.per_sample > 0


def test_batch_independent_work_is_fixed() -> None:
    """Swin V2 runs its position-bias MLP on a table that does not depend on the batch."""
    table = introspect("swin_v2_t", (3, 256, 256), allow_factories=False)
    bias_mlp = [layer for layer in table.layers if "cpb_mlp" in layer.name and layer.kind is LayerKind.LINEAR]
    assert bias_mlp
    assert all(layer.forward_flops.per_sample == 0 < layer.forward_flops.fixed for layer in bias_mlp)


def test_default_sizes_come_from_the_weights() -> None:
    assert default_case("inception_v3") == ((3, 299, 299), {})
    assert default_case("vit_h_14") == ((3, 518, 518), {"image_size": 518})
