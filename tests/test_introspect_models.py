"""Every torchvision classification model introspects at its default input size (the weights' crop)."""

from __future__ import annotations

import math

import pytest
import torchvision

from advisor.introspect import LayerKind
from advisor.introspect.run import introspect

MODELS = torchvision.models.list_models(module=torchvision.models)


def default_case(name: str) -> tuple[tuple[int, int, int], dict[str, int]]:
    """The input size the pretrained weights expect; a ViT needs its image size as an argument as well."""
    weights = torchvision.models.get_model_weights(name).DEFAULT
    crop = int(weights.transforms.keywords["crop_size"])
    kwargs = {"image_size": crop} if name.startswith("vit_") and crop != 224 else {}
    return (3, crop, crop), kwargs


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("name", MODELS)
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
