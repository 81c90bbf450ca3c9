"""The op registry: every op kind this advisor knows, in one tuple (`OPS`), and how to find one.

Adding an op is one entry here (its kinds, costs, configuration and builder) plus its tests: the nightly
plan, the micro-benchmark, the features and the layer model read what they need from its entry. A timed
op's ``group`` is a step feature, so a new timed op changes the step model's feature layout, and models
fitted before it are refused until `advisor models train` fits new ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from fnmatch import fnmatchcase
from functools import partial

from advisor.introspect import Layer
from advisor.ops import configs, costs
from advisor.ops.op import Configure, KernelPath, Op
from advisor.records import LayerConfig

_BUILDERS = "advisor.ops.workloads"


def _pointwise(config: LayerConfig) -> KernelPath:
    one = config.kernel == (1, 1) and config.stride == (1, 1)
    return KernelPath.POINTWISE if one else KernelPath.OTHER


def _dense(config: LayerConfig) -> bool:
    return config.groups == 1


def _depthwise(config: LayerConfig) -> bool:
    return config.depthwise


def _grouped(config: LayerConfig) -> bool:
    return config.grouped


_SOFTMAX_OPS = frozenset({"Softmax", "LogSoftmax", "softmax", "_softmax", "_safe_softmax", "_log_softmax"})
_RMS_NORM = re.compile(r"(rmsnorm\d*|rms_norm)$", re.IGNORECASE)
"""Torch's and Hugging Face's RMS norm modules (``LlamaRMSNorm``) and the functional op."""


def _softmax(layer: Layer, batch: int, amp: bool) -> LayerConfig | None:
    """The introspection counts a softmax among activations; its rows tell it apart."""
    return configs.rows("softmax", layer, batch, amp) if layer.op in _SOFTMAX_OPS else None


def _activation(layer: Layer, batch: int, amp: bool) -> LayerConfig | None:
    return None if layer.op in _SOFTMAX_OPS else configs.flat("activation", layer, batch, amp)


def _rms_norm(layer: Layer, batch: int, amp: bool) -> LayerConfig | None:
    """The introspection counts an RMS norm among layer norms (a module of its own) or element-wise ops (a
    bare op); its name tells it apart."""
    return configs.rows("rms_norm", layer, batch, amp) if _RMS_NORM.search(layer.op) else None


def _vector(
    name: str,
    rates: costs.VectorRates,
    kinds: tuple[str, ...],
    config: Configure | None,
    sweep: Callable[[str, int], LayerConfig] | None = None,
) -> Op:
    """A bandwidth-bound op; ``sweep`` (a `configs.swept_*`): the bandwidth sweep measures it over sizes."""
    swept = partial(sweep, name) if sweep is not None else None
    cost = partial(costs.vector, rates)
    return Op(name, "vector", frozenset(kinds), cost, f"{_BUILDERS}:{name}", config=config, sweep=swept)


def _update(name: str, rates: costs.UpdateRates) -> Op:
    """Torch's optimizers update every parameter at once with ``_foreach`` (or fused) ops where they can;
    on a CPU, SGD runs plain element-wise ops, which only the profile's ``Optimizer.step`` tells apart."""
    aten = ("aten::_foreach_*", f"aten::_fused_{name.removesuffix('_momentum')}*")
    return Op(name, "update", frozenset(), partial(costs.update, rates), f"{_BUILDERS}:{name}", aten=aten)


RELEASE = "grad_release"
"""The gradients' release after the step (`advisor.ops.workloads.grad_release`), swept beside the updates."""
_TINY_OPS = ("tiny_conv2d", "tiny_linear", "tiny_batch_norm", "tiny_activation", "tiny_elementwise",
             "tiny_pooling")  # fmt: skip
"""Chains of tiny real layers of one kind, each a module (`configs.tiny_chain`): a layer's cost when its
kernels do almost nothing, what it pays outside them (its module call, Python, autograd's nodes)."""
_CONV = partial(configs.convolution, "conv2d")
OPS: tuple[Op, ...] = (
    Op("conv2d", "convolution", frozenset({"conv"}), costs.convolution, f"{_BUILDERS}:convolution",
       config=_CONV, covers=_dense, timed=True, group="dense", kernel_path=_pointwise,
       aten=("aten::*convolution*", "aten::*conv[123]d*", "aten::*conv_*")),
    Op("depthwise_conv2d", "convolution", frozenset({"conv"}), costs.convolution,
       f"{_BUILDERS}:convolution", config=_CONV, config_op="conv2d", covers=_depthwise, timed=True,
       group="depthwise", kernel_path=_pointwise),
    Op("grouped_conv2d", "convolution", frozenset({"conv"}), costs.convolution, f"{_BUILDERS}:convolution",
       config=_CONV, config_op="conv2d", covers=_grouped, timed=True, group="grouped"),
    Op("conv_transpose2d", "convolution", frozenset({"conv_transpose"}), costs.transposed_convolution,
       f"{_BUILDERS}:transposed_convolution", config=partial(configs.convolution, "conv_transpose2d"),
       timed=True, group="dense"),
    Op("linear", "matrix", frozenset({"linear"}), costs.linear, f"{_BUILDERS}:linear",
       config=partial(configs.rows, "linear"), timed=True, group="linear", aten=("aten::addmm", "aten::mm")),
    Op("matmul", "matrix", frozenset({"matmul"}), costs.matrix_product, f"{_BUILDERS}:matrix_product",
       config=partial(configs.matrix_product, "matmul"),
       aten=("aten::bmm", "aten::baddbmm", "aten::matmul")),
    Op("attention", "matrix", frozenset({"attention"}), costs.attention, f"{_BUILDERS}:attention",
       config=partial(configs.attention, "attention", math_path=False)),
    Op("math_attention", "matrix", frozenset({"attention"}), costs.math_attention,
       f"{_BUILDERS}:math_attention", config=partial(configs.attention, "math_attention", math_path=True)),
    _vector("batch_norm", costs.NORM, ("batch_norm",), partial(configs.channels, "batch_norm"),
            configs.swept_channels),
    # Batch norm over 2x2 maps, swept alone: what batch_norm's price reads on maps under LARGE_MAP positions.
    Op("batch_norm_small_maps", "vector", frozenset(), partial(costs.vector, costs.NORM),
       f"{_BUILDERS}:small_maps", sweep=partial(configs.swept_small_maps, "batch_norm_small_maps")),
    _vector("rms_norm", costs.RMS_NORM, ("layer_norm", "elementwise"), _rms_norm, configs.swept_rows),
    _vector("layer_norm", costs.NORM, ("layer_norm",), partial(configs.rows, "layer_norm"),
            configs.swept_rows),
    _vector("group_norm", costs.NORM, ("group_norm",), partial(configs.channels, "group_norm")),
    _vector("softmax", costs.SOFTMAX, ("activation",), _softmax, configs.swept_rows),
    _vector("activation", costs.ACTIVATION, ("activation",), _activation, configs.swept_flat),
    # Swept: a CPU draws its mask one element at a time, far slower than the bytes (GPT-2's 37 dropouts
    # took 108 ms of a 3.4 s step, priced 10 ms by bytes).
    _vector("dropout", costs.DROPOUT, ("dropout",), partial(configs.flat, "dropout"), configs.swept_flat),
    _vector("elementwise", costs.ELEMENTWISE, ("elementwise",), partial(configs.flat, "elementwise"),
            configs.swept_flat),
    Op("pooling", "vector", frozenset({"pooling"}), costs.pooling, f"{_BUILDERS}:pooling",
       config=partial(configs.pooling, "pooling"), sweep=partial(configs.swept_pooling, "pooling")),
    Op("embedding", "vector", frozenset({"embedding"}), costs.embedding, f"{_BUILDERS}:embedding",
       config=partial(configs.embedding, "embedding"), sweep=partial(configs.swept_table, "embedding")),
    _vector("cross_entropy", costs.CROSS_ENTROPY, (), None),
    _update("sgd_momentum", costs.SGD_MOMENTUM),
    _update("adam", costs.ADAM),
    _update("adamw", costs.ADAMW),
    # What setting the gradients to None costs: a block past glibc's mmap threshold goes back to the kernel.
    Op(RELEASE, "update", frozenset(), partial(costs.update, costs.GRAD_RELEASE),
       f"{_BUILDERS}:grad_release"),
    Op("launch_chain", "launch", frozenset(), costs.launch_chain, f"{_BUILDERS}:launch_chain"),
    # The same chain, each op in its own module call: its slope less the launch chain's is a module call.
    Op("module_chain", "launch", frozenset(), costs.launch_chain, f"{_BUILDERS}:module_chain"),
    *(Op(name, "launch", frozenset(), costs.tiny_chain, f"{_BUILDERS}:tiny_layers") for name in _TINY_OPS),
)  # fmt: skip
"""Where several ops cover one kind, the first whose configuration fits a layer is its op."""
SMALL_MAPS = {"batch_norm": "batch_norm_small_maps"}
TINY_LAYERS = {
    **dict.fromkeys(("conv2d", "depthwise_conv2d", "grouped_conv2d", "conv_transpose2d"), "tiny_conv2d"),
    "linear": "tiny_linear",
    "batch_norm": "tiny_batch_norm",
    "activation": "tiny_activation",
    "elementwise": "tiny_elementwise",
    "pooling": "tiny_pooling",
}
"""The tiny-layer chain whose cost a layer prices what a layer of each op pays outside its kernels: a
convolution's by the dense one's (a tiny depthwise convolution's own time is its kernels' fixed cost, not
Python's, benchmarks/README.md)."""
"""Ops swept over small maps apart (`configs.swept_small_maps`): the registry entry that prices each there."""


def op_named(name: str) -> Op:
    for op in OPS:
        if op.name == name:
            return op
    raise ValueError(f"no op is named {name!r} (advisor.ops.known.OPS)")


def op_of(config: LayerConfig) -> Op:
    """The op a benchmark configuration belongs to."""
    for op in OPS:
        if op.config_name == config.op and op.covers(config):
            return op
    raise ValueError(f"no op covers a {config.op!r} configuration (advisor.ops.known.OPS)")


def layer_op(
    layer: Layer, batch: int = 1, amp: bool = False, *, timed: bool = False
) -> tuple[Op, LayerConfig] | None:
    """The op of a layer and its benchmark configuration at ``batch``, or None where no op's configuration
    fits it (its table costs stand for it); ``timed``: only the ops the nightly grid times."""
    for op in _candidates(layer.kind, timed):
        config = op.config(layer, batch, amp) if op.config is not None else None
        if config is not None and op.covers(config):
            return op, config
    return None


def _candidates(kind: str, timed: bool) -> Iterator[Op]:
    return (op for op in OPS if kind in op.kinds and (op.timed or not timed))


def profiled_op(name: str) -> Op | None:
    """The op a profiler's kernel name belongs to (the first whose ``aten`` patterns match), else None."""
    return next((op for op in OPS if any(fnmatchcase(name, pattern) for pattern in op.aten)), None)


def timed_groups() -> tuple[str, ...]:
    """The step features the timed ops' seconds add to, in the registry's order."""
    return tuple(dict.fromkeys(op.group for op in OPS if op.timed))


def timed_kinds() -> frozenset[str]:
    """The introspection's kinds whose layers the timed ops may cover."""
    return frozenset(kind for op in OPS if op.timed for kind in op.kinds)
