"""How a layer of the introspection's table becomes its op's benchmark configuration (`LayerConfig`).

Every op fills the same fields, read as its entry says; shapes are per sample (the batch dimension is 1).
A layer that does not have the shape its op needs gets None: it is not benchmarked, its table costs stay.
"""

from __future__ import annotations

from itertools import product
from math import isqrt, prod

from advisor.introspect import Layer, LayerKind
from advisor.ops.costs import ELEMENT_BYTES
from advisor.records import LayerConfig

_UNIT = {"kernel": (1, 1), "stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1}


def _batched(layer: Layer) -> bool:
    return bool(layer.inputs and layer.outputs and layer.inputs[0].batch_dim is not None)


def _config(op: str, batch: int, amp: bool, **fields: object) -> LayerConfig:
    return LayerConfig.model_validate(
        {"op": op, **_UNIT, **fields, "batch": batch, "amp": amp, "cudnn_benchmark": True}
    )


def convolution(op: str, layer: Layer, batch: int, amp: bool) -> LayerConfig | None:
    """A 2-d (transposed) convolution's geometry from its window: channels, kernel, stride, padding,
    dilation, groups; ``height x width`` is its input's."""
    window, dims = layer.window, layer.inputs[0].dims if layer.inputs else ()
    if not _batched(layer) or window is None or window.channels is None:
        return None
    if len(window.kernel) != 2 or len(dims) != 4:
        return None
    return _config(
        op,
        batch,
        amp,
        in_channels=window.channels[0],
        out_channels=window.channels[1],
        kernel=window.kernel,
        stride=window.stride,
        padding=window.padding,
        dilation=window.dilation,
        groups=window.groups,
        height=dims[2],
        width=dims[3],
        channels_last=window.channels_last,
    )


def rows(op: str, layer: Layer, batch: int, amp: bool) -> LayerConfig | None:
    """An op over its input's last dimension (a linear, a layer or RMS norm, a softmax): that dimension is
    ``in_channels``, the rows per sample (tokens, windows) ``height``, so one config covers ViT's
    ``(tokens, features)`` and Swin's ``(h, w, features)`` alike."""
    if not _batched(layer):
        return None
    dims = layer.inputs[0].dims
    out = layer.outputs[0].dims[-1] if layer.outputs[0].dims else dims[-1]
    return _config(op, batch, amp, in_channels=dims[-1], out_channels=out, height=prod(dims[:-1]), width=1)


def channels(op: str, layer: Layer, batch: int, amp: bool) -> LayerConfig | None:
    """An op over channels (batch and group norm): ``in_channels`` is the second dimension, the positions
    per sample ``height``."""
    if not _batched(layer) or len(layer.inputs[0].dims) < 2:
        return None
    dims = layer.inputs[0].dims
    return _config(op, batch, amp, in_channels=dims[1], out_channels=dims[1], height=prod(dims[2:]), width=1)


def flat(op: str, layer: Layer, batch: int, amp: bool) -> LayerConfig | None:
    """An element-wise op: its output's elements per sample are ``height``."""
    if not _batched(layer):
        return None
    size = prod(layer.outputs[0].dims)
    return _config(op, batch, amp, in_channels=1, out_channels=1, height=max(size, 1), width=1)


COMPOSITE_KERNELS = 4
"""Kernels from which a module counts as several: under it an in-place ReLU6, whose output the introspection
counts as written twice, or a norm writing its statistics beside its output, is one."""


def kernels(layer: Layer) -> int:
    """The kernels a module runs, as the introspection counts them by its outputs' worth written, where they
    are `COMPOSITE_KERNELS` or more, else one: GPT-2's tanh GELU (``NewGELUActivation``) runs eight (pow,
    mul, add, mul, tanh, add, mul, mul) and, priced as one kernel, came to a tenth of its time. Each costs
    what one over its elements does: at a few elements, its launches. Attention is one fused kernel, whose
    math path the introspection counts (five outputs' worth)."""
    if layer.kind is LayerKind.ATTENTION:
        return 1
    output = prod(layer.outputs[0].dims) * ELEMENT_BYTES if layer.outputs else 0
    written = layer.at_batch(1).bytes_written // output if output else 1
    return written if written >= COMPOSITE_KERNELS else 1


def pooling(op: str, layer: Layer, batch: int, amp: bool) -> LayerConfig | None:
    """A 2-d pool over ``in_channels`` maps of ``height x width``: its window, or the whole map where it has
    none (adaptive and global pools, whose output is one position)."""
    dims = layer.inputs[0].dims if layer.inputs else ()
    if not _batched(layer) or len(dims) != 4:
        return None
    window = layer.window
    if window is None:
        if prod(layer.outputs[0].dims[2:]) != 1:
            return None
        sides = (dims[2], dims[3])
        geometry: dict[str, object] = {"kernel": sides, "stride": sides}
    elif len(window.kernel) == 2:
        geometry = {f: getattr(window, f) for f in ("kernel", "stride", "padding", "dilation")}
    else:
        return None
    return _config(
        op, batch, amp, in_channels=dims[1], out_channels=dims[1], height=dims[2], width=dims[3], **geometry
    )


def matrix_product(op: str, layer: Layer, batch: int, amp: bool) -> LayerConfig | None:
    """``(..., m, k) @ (..., k, n)`` with both operands activations: ``width`` products of ``height x
    in_channels`` by ``in_channels x out_channels`` per sample."""
    if not _batched(layer) or len(layer.inputs) < 2:
        return None
    a, b = layer.inputs[0].dims, layer.inputs[1].dims
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return None
    return _config(op, batch, amp, in_channels=a[-1], out_channels=b[-1], height=a[-2], width=prod(a[:-2]))


def attention(op: str, layer: Layer, batch: int, amp: bool, *, math_path: bool) -> LayerConfig | None:
    """``scaled_dot_product_attention(q, k, v)`` on the path ``math_path`` says (`Layer.math_path`):
    ``groups`` heads per sample, ``height`` queries, ``width`` keys, ``in_channels`` the key dimension,
    ``out_channels`` the value dimension."""
    if layer.op != "scaled_dot_product_attention" or layer.math_path != math_path:
        return None
    if not _batched(layer) or len(layer.inputs) < 3:
        return None
    q, k, v = (shape.dims for shape in layer.inputs[:3])
    if min(len(q), len(k), len(v)) < 3:
        return None
    fields = {"in_channels": q[-1], "out_channels": v[-1], "height": q[-2], "width": k[-2]}
    return _config(op, batch, amp, groups=prod(q[:-2]), **fields)


def embedding(op: str, layer: Layer, batch: int, amp: bool) -> LayerConfig | None:
    """``height`` tokens per sample looked up in a table of ``in_channels`` rows of ``out_channels``."""
    if not _batched(layer) or not layer.outputs[0].dims:
        return None
    width = layer.outputs[0].dims[-1]
    rows_in_table = layer.parameters // width if width else 0
    if rows_in_table < 1:
        return None
    tokens = prod(layer.inputs[0].dims)
    return _config(op, batch, amp, in_channels=rows_in_table, out_channels=width, height=tokens, width=1)


SWEPT_CHANNELS = 64
"""Channels of a swept channel op (batch norm, pooling): a CNN's early maps."""
SWEPT_ROW = 256
"""Row length of a swept row op (layer and RMS norm, softmax): a transformer's narrow width."""
SMALL_MAP = 4
"""Positions of a small map (2x2, a CNN's last stages at 32 px): fewer than a vector register holds, where a
CPU's batch norm pays per (sample, channel) plane: 5-6 times its time per element on larger maps."""
LARGE_MAP = 16
"""Positions of the channel sweep's smallest maps (1 Ki elements over `SWEPT_CHANNELS` channels)."""


def swept_flat(op: str, elements: int) -> LayerConfig:
    """An element-wise op over ``elements`` values: the bandwidth sweep's configuration (batch 1)."""
    return _config(op, 1, False, in_channels=1, out_channels=1, height=elements, width=1)


def swept_channels(op: str, elements: int) -> LayerConfig:
    """A channel op over `SWEPT_CHANNELS` maps of ``elements / SWEPT_CHANNELS`` positions."""
    positions = max(1, elements // SWEPT_CHANNELS)
    return _config(
        op, 1, False, in_channels=SWEPT_CHANNELS, out_channels=SWEPT_CHANNELS, height=positions, width=1
    )


def swept_small_maps(op: str, elements: int) -> LayerConfig:
    """A channel op over `SWEPT_CHANNELS` maps of `SMALL_MAP` positions in ``width`` samples, as many as
    ``elements`` fill (`advisor.ops.workloads.small_maps`): at batch one, as every sweep, so no batch size
    of the grid's gains a configuration; in one sample of as many channels it ran 1.2-1.5 times slower than a
    network's maps do."""
    samples = max(1, elements // (SWEPT_CHANNELS * SMALL_MAP))
    fields = {"in_channels": SWEPT_CHANNELS, "out_channels": SWEPT_CHANNELS, "height": SMALL_MAP}
    return _config(op, 1, False, **fields, width=samples)


def swept_rows(op: str, elements: int) -> LayerConfig:
    """A row op over rows of `SWEPT_ROW` features, ``elements / SWEPT_ROW`` of them."""
    rows = max(1, elements // SWEPT_ROW)
    return _config(op, 1, False, in_channels=SWEPT_ROW, out_channels=SWEPT_ROW, height=rows, width=1)


def swept_table(op: str, elements: int) -> LayerConfig:
    """An embedding table of ``elements`` in rows of `SWEPT_ROW`, looked up by `SWEPT_ROW` tokens: its
    backward writes a dense gradient the table's size, fresh each step (on a CPU, a table of 32 MiB or more
    faults its pages in: GPT-2's 154 MB zeroed in 124 ms, the same bytes added in place in 23)."""
    rows = max(1, elements // SWEPT_ROW)
    return _config(op, 1, False, in_channels=rows, out_channels=SWEPT_ROW, height=SWEPT_ROW, width=1)


def swept_pooling(op: str, elements: int) -> LayerConfig:
    """A 3x3 stride-2 max pool (a ResNet stem's) over `SWEPT_CHANNELS` square maps of about
    ``elements / SWEPT_CHANNELS`` positions."""
    side = max(2, isqrt(elements // SWEPT_CHANNELS))
    return _config(
        op,
        1,
        False,
        in_channels=SWEPT_CHANNELS,
        out_channels=SWEPT_CHANNELS,
        height=side,
        width=side,
        kernel=(3, 3),
        stride=(2, 2),
        padding=(1, 1),
    )


def launch_chain(length: int, elements: int) -> LayerConfig:
    """``length`` tiny ops in a row, each on ``elements`` values (`advisor.ops.workloads.launch_chain`)."""
    return _config("launch_chain", 1, False, in_channels=1, out_channels=1, height=length, width=elements)


def module_chain(length: int, elements: int) -> LayerConfig:
    """The launch chain's ``length`` ops, each in a module call of its own
    (`advisor.ops.workloads.module_chain`)."""
    return _config("module_chain", 1, False, in_channels=1, out_channels=1, height=length, width=elements)


TINY_CHANNELS = 8
"""Channels of a tiny layer (`tiny_chain`): so few that its kernels do almost nothing."""
TINY_SIDE = 2
"""Side of a tiny layer's square maps."""


def tiny_chain(op: str, length: int) -> LayerConfig:
    """``length`` tiny real layers of one kind in a row, each a module of its own, on `TINY_CHANNELS` maps
    of `TINY_SIDE` x `TINY_SIDE` (`advisor.ops.workloads.tiny_layers`)."""
    fields = {"in_channels": TINY_CHANNELS, "out_channels": TINY_CHANNELS, "height": length}
    return _config(op, 1, False, **fields, width=TINY_SIDE)


def update(op: str, parameters: int, tensors: int) -> LayerConfig:
    """An optimizer's step over ``parameters`` parameters in ``tensors`` tensors of equal size: ``height``
    parameters each, ``width`` tensors (a step's cost beyond its bytes is per tensor)."""
    return _config(
        op, 1, False, in_channels=1, out_channels=1, height=max(1, parameters // tensors), width=tensors
    )


def _same_map(
    width: int, kernel: int, side: int, groups: int = 1, *, channels_last: bool = False
) -> LayerConfig:
    """A square ``conv2d`` of stride 1, padded to keep its map, as many channels out as in."""
    padding = (kernel // 2, kernel // 2)
    return _config(
        "conv2d",
        1,
        False,
        in_channels=width,
        out_channels=width,
        groups=groups,
        kernel=(kernel, kernel),
        padding=padding,
        height=side,
        width=side,
        channels_last=channels_last,
    )


def dense_convolutions(
    kernels: tuple[int, ...], channels: tuple[int, ...], sides: tuple[int, ...], most: int
) -> tuple[LayerConfig, ...]:
    """Dense ``conv2d`` layers of each odd kernel (stride 1, padded to keep the map), ``channels`` in and out,
    on square maps of ``sides``, where channels x side is at most ``most``: a CNN's width grows as its maps
    shrink, so its layers lie along that diagonal, never in the grid's costly far corner."""
    return tuple(
        _same_map(width, kernel, side)
        for kernel, width, side in product(kernels, channels, sides)
        if width * side <= most
    )


def grouped_convolutions(
    widths: tuple[int, ...], per_group: int, sides: tuple[int, ...]
) -> tuple[LayerConfig, ...]:
    """Grouped 3x3 ``conv2d`` layers (stride 1, padded to keep the map) of ``per_group`` channels a group,
    ``widths`` in and out, on square maps of ``sides``: a RegNet's or ResNeXt's last stages, which the zoo
    reaches only at its own widths (on a CPU, few channels a group on a map of a pixel or two run far below
    the speed the zoo's larger maps show)."""
    return tuple(_same_map(width, 3, side, width // per_group) for width, side in product(widths, sides))


def depthwise_convolutions(
    kernels: tuple[int, ...],
    widths: tuple[int, ...],
    sides: tuple[int, ...],
    most: int,
    *,
    channels_last: bool = False,
) -> tuple[LayerConfig, ...]:
    """Depthwise ``conv2d`` layers of each odd kernel (stride 1, padded to keep the map) on square maps of
    ``sides``, where channels x side is at most ``most``: ConvNeXt's 7x7, which no zoo model has (its
    depthwise layers are 3x3 and 5x5), on the maps of a pixel or two its last stages have at 32 px; its
    inputs ``channels_last`` as ConvNeXt's blocks hand them on after their permute."""
    return tuple(
        _same_map(width, kernel, side, width, channels_last=channels_last)
        for kernel, width, side in product(kernels, widths, sides)
        if width * side <= most
    )


def linears(widths: tuple[int, ...], tokens: tuple[int, ...], most: int) -> tuple[LayerConfig, ...]:
    """``linear`` layers of each pair of ``widths`` in and out over ``tokens`` rows a sample (one for a CNN's
    head), where in x out x tokens is at most ``most``: the zoo's small transformers are 128 wide and its
    wide linears are one-row heads, so on a CPU nothing in it shows a wide linear over many rows running at
    a transformer's speed."""
    return tuple(
        _config("linear", 1, False, in_channels=fan_in, out_channels=fan_out, height=count, width=1)
        for count, fan_in, fan_out in product(tokens, widths, widths)
        if fan_in * fan_out * count <= most
    )


def vocabulary_heads(
    widths: tuple[int, ...], vocabularies: tuple[int, ...], tokens: int
) -> tuple[LayerConfig, ...]:
    """A language model's head: ``linear`` layers from each of ``widths`` to each of ``vocabularies`` over
    ``tokens`` rows a sample. Every published language model ends in one, tens of thousands of outputs wide,
    where the zoo's widest linear has 4,096: the layer booster, asked of one out there, priced GPT-2's,
    BERT's and T5-small's heads at 1.8-2.1 times their measured time (benchmarks/README.md)."""
    return tuple(
        _config("linear", 1, False, in_channels=width, out_channels=vocabulary, height=tokens, width=1)
        for width, vocabulary in product(widths, vocabularies)
    )
