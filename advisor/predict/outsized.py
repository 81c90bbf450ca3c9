"""A timed layer far larger than any benchmarked one of its op family, priced by what it does.

A tree is flat outside its data: the layer booster prices a layer far larger than every one it saw as the
largest it saw. Held out of the CPU zoo, vgg11_bn's 25088 x 4096 linear (103 M weights; the zoo's largest
timed layer has 2.4 M) got 0.28 times its measured time at batch 1 and 1.52 times at 128. Measured, it is
its weights streamed plus its arithmetic (benchmarks/README.md, issue 51).
"""

from __future__ import annotations

from collections.abc import Iterable

from advisor.ops import op_of
from advisor.ops.op import Family
from advisor.predict.roofline import LAUNCHES_PER_LAYER, Roofline
from advisor.records import LayerConfig

OUTSIZED = 2.0
"""How many times the bytes of its family's largest benchmarked layer a layer must move to be outsized: near
the edge the booster still knows it (VGG's 512-channel 3x3 is the size of ResNet's; by the rates at 4 x 4
positions it came out 2.3-3.1 times its measured time)."""


def layer_size(config: LayerConfig) -> float:
    """What a layer moves at batch one (its weights, for a large one): how large it is."""
    return op_of(config).cost(config.model_copy(update={"batch": 1})).forward_bytes


Largest = dict[Family, float]
"""Each op family's largest benchmarked layer's size (``layer_size``)."""


def largest_layers(configs: Iterable[LayerConfig]) -> Largest:
    """Each op family's largest benchmarked layer's size (``layer_size``)."""
    largest: Largest = {}
    for config in configs:
        family = op_of(config).family
        largest[family] = max(largest.get(family, 0.0), layer_size(config))
    return largest


def outsized(config: LayerConfig, largest: Largest, rates: Roofline | None) -> bool:
    """Whether ``config`` moves over ``OUTSIZED`` times its family's largest benchmarked layer, on a machine
    whose sweeps measured what moving bytes costs (the timed layers' own bandwidth is of layers in cache)."""
    if rates is None or not rates.swept.curves:
        return False
    return layer_size(config) > OUTSIZED * largest.get(op_of(config).family, 0.0)


def outsized_seconds(config: LayerConfig, largest: Largest, rates: Roofline | None) -> float | None:
    """An outsized layer's training step (None for a layer that is not): its launches, its arithmetic at
    the machine's best rate (the fastest family's upper tenth: a layer that large is one large product,
    where its own family's rate may come from small layers only) and its bytes at the bandwidth roof (the
    fastest swept op's at that size), one after the other: the big linear streams its weights at batch 1 and
    computes at 128."""
    if rates is None or not outsized(config, largest, rates):
        return None
    cost = op_of(config).cost(config)
    moved = cost.forward_bytes + cost.backward_bytes
    streamed = rates.swept.least_bytes_seconds(moved) or moved / rates.bandwidth
    computed = cost.train_flops / max(rates.compute.values())
    return LAUNCHES_PER_LAYER * rates.launch_seconds() + computed + streamed
