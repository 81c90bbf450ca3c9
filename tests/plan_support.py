"""A layer table without introspection: plans are pure, and planning the real zoo takes a minute."""

from __future__ import annotations

from advisor.introspect import Layer, LayerKind, LayerTable, Scaling, TensorShape
from advisor.introspect.table import Probe, Window


def fake_table(name: str, size: int) -> LayerTable:
    """A convolution (whose channels follow the model, so models differ) and a linear layer."""
    channels = 8 + len(name)
    conv = Layer(
        index=0,
        name="conv",
        op="Conv2d",
        kind=LayerKind.CONV,
        inputs=(TensorShape(dims=(1, 3, size, size), batch_dim=0),),
        outputs=(TensorShape(dims=(1, channels, size, size), batch_dim=0),),
        window=Window(kernel=(3, 3), stride=(1, 1), padding=(1, 1), dilation=(1, 1), channels=(3, channels)),
        parameters=27 * channels,
        forward_flops=Scaling(per_sample=54 * channels * size * size),
        backward_flops=Scaling(per_sample=108 * channels * size * size),
        bytes_read=Scaling(per_sample=12 * size * size, fixed=108 * channels),
        bytes_written=Scaling(per_sample=4 * channels * size * size),
    )
    linear = Layer(
        index=1,
        name="fc",
        op="Linear",
        kind=LayerKind.LINEAR,
        inputs=(TensorShape(dims=(1, channels), batch_dim=0),),
        outputs=(TensorShape(dims=(1, 10), batch_dim=0),),
        parameters=10 * channels,
        forward_flops=Scaling(per_sample=20 * channels),
        backward_flops=Scaling(per_sample=40 * channels),
        bytes_read=Scaling(per_sample=4 * channels, fixed=40 * channels),
        bytes_written=Scaling(per_sample=40),
    )
    saved = Scaling(per_sample=8 * channels * size * size)
    return LayerTable.build(name, {}, (3, size, size), Probe((conv, linear), 37 * channels, saved))
