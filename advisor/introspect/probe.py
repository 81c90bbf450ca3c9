"""One training step on the meta device at ``PROBE_BATCH``, recorded op by op and grouped into layers.

Hooks, not symbolic tracing, so forwards with Python control flow that depends on shapes work. Grouping:
every call of a leaf module is a layer; so is every attention call (``scaled_dot_product_attention`` and
``multi_head_attention_forward``, which are functions, not leaf modules); any other op outside those that
moves bytes or does FLOPs is a layer of its own. FLOPs of convolutions and matrix products are the project's
own count (`advisor.introspect.flops`: torch's over-counts grouped convolutions); the rest come from torch's
``flop_registry``, applied as ``FlopCounterMode`` applies it. Backward ops are charged to the forward layer
whose autograd node runs them, matched by the node's sequence number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry

from advisor.introspect import batch, flops
from advisor.introspect.attention import AttentionScope
from advisor.introspect.errors import IntrospectionError
from advisor.introspect.memo import MetaMemo, storage
from advisor.introspect.table import Layer, LayerKind, Probe, Scaling, TensorShape, Window

aten = torch.ops.aten
_NORM_MODULES = re.compile(r"(RMS|Layer)Norm\d*$", re.IGNORECASE)
"""Leaf modules that normalise by a hand-written mean (Llama's RMSNorm, T5's LayerNorm), not torch's op."""
# Allocate without writing: their outputs cost nothing until something fills them.
_ALLOCATING = frozenset({aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty})
_CONVOLUTIONS = frozenset({aten.convolution, aten._convolution, aten.convolution_overrideable})
_POOLS_WITH_WINDOW = frozenset(
    {
        aten.max_pool1d,
        aten.max_pool2d,
        aten.max_pool3d,
        aten.max_pool2d_with_indices,
        aten.max_pool3d_with_indices,
        aten.avg_pool1d,
        aten.avg_pool2d,
        aten.avg_pool3d,
    }
)
_KIND_BY_OP = {
    **dict.fromkeys(("addmm", "mm", "linear"), LayerKind.LINEAR),
    **dict.fromkeys(("bmm", "baddbmm", "matmul"), LayerKind.MATMUL),
    **dict.fromkeys(
        ("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training"),
        LayerKind.BATCH_NORM,
    ),
    "native_layer_norm": LayerKind.LAYER_NORM,
    "native_group_norm": LayerKind.GROUP_NORM,
    "embedding": LayerKind.EMBEDDING,
    **dict.fromkeys(("native_dropout", "bernoulli", "bernoulli_"), LayerKind.DROPOUT),
    **dict.fromkeys(
        ("adaptive_avg_pool2d", "_adaptive_avg_pool2d", "adaptive_max_pool2d", "mean", "amax"),
        LayerKind.POOLING,
    ),
    **dict.fromkeys(
        (
            "relu", "relu_", "relu6", "gelu", "silu", "silu_", "hardswish", "hardswish_", "hardsigmoid",
            "hardsigmoid_", "sigmoid", "sigmoid_", "tanh", "tanh_", "hardtanh", "hardtanh_", "leaky_relu",
            "leaky_relu_", "elu", "elu_", "mish", "_softmax", "_safe_softmax", "_log_softmax", "threshold",
        ),
        LayerKind.ACTIVATION,
    ),
}  # fmt: skip


# When a layer runs ops of several kinds, the first one here names it (a Linear's bias add stays linear).
_PRIORITY = (
    LayerKind.ATTENTION,
    LayerKind.CONV_TRANSPOSE,
    LayerKind.CONV,
    LayerKind.LINEAR,
    LayerKind.MATMUL,
    LayerKind.EMBEDDING,
    LayerKind.BATCH_NORM,
    LayerKind.LAYER_NORM,
    LayerKind.GROUP_NORM,
    LayerKind.POOLING,
    LayerKind.DROPOUT,
    LayerKind.ACTIVATION,
    LayerKind.ELEMENTWISE,
)


@dataclass
class RawLayer:
    """A layer while it is being recorded; ``freeze`` makes the validated row."""

    name: str
    op: str
    inputs: list[TensorShape]
    outputs: list[TensorShape] = field(default_factory=list)
    kinds: set[LayerKind] = field(default_factory=set)
    window: Window | None = None
    parameters: int = 0
    forward_flops: Scaling = field(default_factory=Scaling)
    backward_flops: Scaling = field(default_factory=Scaling)
    bytes_read: Scaling = field(default_factory=Scaling)
    bytes_written: Scaling = field(default_factory=Scaling)
    formula: bool = False
    """Costs set by a formula for the whole call (`advisor.introspect.attention`), not summed from its ops."""
    math_path: bool = False

    def freeze(self, index: int) -> Layer:
        kind = min(self.kinds, key=_PRIORITY.index, default=LayerKind.ELEMENTWISE)
        return Layer(
            index=index,
            name=self.name,
            op=self.op,
            kind=LayerKind.LAYER_NORM if _NORM_MODULES.search(self.op) else kind,
            inputs=tuple(self.inputs),
            outputs=tuple(self.outputs),
            window=self.window,
            parameters=self.parameters,
            forward_flops=self.forward_flops,
            backward_flops=self.backward_flops,
            bytes_read=self.bytes_read,
            bytes_written=self.bytes_written,
            math_path=self.math_path,
        )


def run_probe(
    model: nn.Module, input_shape: tuple[int, int, int], sequence_length: int | None = None
) -> Probe:
    """Record one training step at ``PROBE_BATCH``, on images of ``input_shape`` or, given a
    ``sequence_length``, on token ids; any exception is the model's and propagates."""
    model.train()
    recorder = _Recorder(model)
    with ExitStack() as stack:
        stack.enter_context(torch.device("meta"))
        stack.enter_context(torch.enable_grad())
        for module_name, module in model.named_modules():
            stack.enter_context(recorder.hooks(module_name, module))
        stack.enter_context(torch.autograd.graph.saved_tensors_hooks(recorder.pack, _unpack))
        stack.enter_context(recorder)
        stack.enter_context(AttentionScope(recorder))
        if sequence_length is None:
            output = model(torch.empty(batch.PROBE_BATCH, *input_shape))
        else:
            output = model(torch.zeros(batch.PROBE_BATCH, sequence_length, dtype=torch.long))
        recorder.forward = False
        outputs = [t for t in tree_leaves(output) if isinstance(t, Tensor) and t.requires_grad]
        if not outputs:
            raise IntrospectionError("the model's output does not depend on its parameters")
        torch.autograd.backward([t.sum() for t in outputs])
    if recorder.unexplained_flops:
        raise IntrospectionError(f"{recorder.unexplained_flops} backward FLOPs belong to no layer")
    worked = [layer for layer in recorder.layers if layer.bytes_written.at(1) or layer.forward_flops.at(1)]
    return Probe(
        layers=tuple(layer.freeze(index) for index, layer in enumerate(worked)),
        parameters=sum(p.numel() for p in model.parameters()),
        saved_activation_bytes=sum(recorder.saved.values(), Scaling()),
    )


class _Recorder(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch leaves it untyped
    def __init__(self, model: nn.Module) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.layers: list[RawLayer] = []
        self.forward = True
        self.unexplained_flops = 0
        self.saved: dict[int, Scaling] = {}
        self._held: list[torch.UntypedStorage] = []
        self.attention_depth = 0
        self._scope: list[str] = []
        self._group: RawLayer | None = None
        self._group_depth = 0
        self._parameters = frozenset(storage(p) for p in model.parameters())
        self._unclaimed = {storage(p): p.numel() for p in model.parameters()}
        self._node_layer: dict[int, RawLayer | None] = {}
        self._sequence = torch._C._autograd._get_sequence_nr()
        self._memo = MetaMemo()

    @contextmanager
    def hooks(self, name: str, module: nn.Module) -> Iterator[None]:
        leaf = next(module.children(), None) is None

        def enter(_module: nn.Module, args: tuple[Any, ...]) -> None:
            self._scope.append(name)
            if leaf:
                self.open(name, type(module).__name__, args)

        def leave(_module: nn.Module, _args: tuple[Any, ...], output: Any) -> None:
            if leaf:
                self.close(output)
            self._scope.pop()

        handles = (module.register_forward_pre_hook(enter), module.register_forward_hook(leave))
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    def open(self, name: str, op: str, args: Any) -> None:
        """Start a layer, unless one is open: whatever a layer calls belongs to it."""
        if self._group is None:
            self._group = RawLayer(name=name, op=op, inputs=_shapes(args))
            self.layers.append(self._group)
        self._group_depth += 1

    def close(self, output: Any) -> None:
        self._group_depth -= 1
        if self._group is not None and self._group_depth == 0:
            self._group.outputs = _shapes(output)
            self._group = None

    @property
    def group(self) -> RawLayer | None:
        return self._group

    @property
    def scope(self) -> str:
        return self._scope[-1] if self._scope else ""

    def pack(self, tensor: Tensor) -> Tensor:
        key = storage(tensor)
        if self.forward and key not in self._parameters:
            self.save(tensor)
        return tensor

    def save(self, tensor: Tensor) -> None:
        """Counts ``tensor``'s storage as saved for the backward, and holds it (meta: no memory) for the rest
        of the probe: its key is its address, which a later storage would otherwise take once a dropped
        branch of the graph freed it, replacing its count by chance (the saved bytes differed run to run)."""
        self._held.append(tensor.untyped_storage())
        self.saved[storage(tensor)] = _bytes(tensor)

    def __torch_dispatch__(
        self, func: Any, types: Sequence[type], args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        packet = func.overloadpacket
        counted = packet in flops.OWN or packet in flop_registry
        if not counted:  # as FlopCounterMode does: count what a composite op becomes
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        out = self._memo(func, args, kwargs)  # the meta kernel, or its answer to an identical earlier call
        if packet in _CONVOLUTIONS and _runs_channels_last(args):
            out = _laid_channels_last(out)
        count = _flops(packet, args, kwargs, out)
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, Tensor)]
        outputs = [t for t in tree_leaves(out) if isinstance(t, Tensor)]
        work = batch.cost(count, any(batch.batch_dims(t.shape) for t in (*tensors, *outputs)))
        if self.forward:
            self._forward_op(func, args, tensors, outputs, work)
        else:
            self._backward_op(work)
        return out

    def _forward_op(
        self, func: Any, args: Sequence[Any], inputs: list[Tensor], outputs: list[Tensor], flops: Scaling
    ) -> None:
        read_from = {storage(t) for t in inputs}
        mutates = func._schema.is_mutable
        written = Scaling()
        if func.overloadpacket not in _ALLOCATING:  # a view writes nothing; an in-place op writes its input
            written = _total(t for t in outputs if mutates or storage(t) not in read_from)
        works = bool(written.at(1) or flops.at(1))
        layer = self._group
        if layer is None and works:
            activations = [t for t in inputs if storage(t) not in self._parameters]
            layer = RawLayer(name=self.scope, op=func.overloadpacket.__name__, inputs=_shapes(activations))
            layer.outputs = _shapes(outputs)
            self.layers.append(layer)
        sequence = torch._C._autograd._get_sequence_nr()
        # The autograd node of this op (if it has one) was created just before it reached this mode.
        for node in range(self._sequence, sequence):
            self._node_layer[node] = layer
        self._sequence = sequence
        if layer is None or not works:
            return
        layer.kinds.add(_kind(func, args, self.attention_depth > 0))
        layer.window = layer.window or _window(func, args)
        for key in read_from & self._unclaimed.keys():  # a weight read by several layers counts once
            layer.parameters += self._unclaimed.pop(key)
        if layer.formula:
            return
        layer.forward_flops += flops
        layer.bytes_written += written
        layer.bytes_read += _total(inputs)

    def _backward_op(self, flops: Scaling) -> None:
        node = torch._C._current_autograd_node()
        layer = None if node is None else self._node_layer.get(node._sequence_nr())
        if layer is None:
            self.unexplained_flops += flops.at(1)
        elif not layer.formula:
            layer.backward_flops += flops


def _flops(packet: Any, args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> int:
    """The project's own count for convolutions and matrix products (`flops`), torch's for the rest."""
    if packet in flops.OWN:
        return flops.OWN[packet](args, out)
    return int(flop_registry[packet](*args, **kwargs, out_val=out)) if packet in flop_registry else 0


def _kind(func: Any, args: Sequence[Any], in_attention: bool) -> LayerKind:
    if in_attention:
        return LayerKind.ATTENTION
    if func.overloadpacket in _CONVOLUTIONS:
        return LayerKind.CONV_TRANSPOSE if args[6] else LayerKind.CONV
    if func.overloadpacket in _POOLS_WITH_WINDOW:
        return LayerKind.POOLING
    return _KIND_BY_OP.get(func.overloadpacket.__name__, LayerKind.ELEMENTWISE)


def _window(func: Any, args: Sequence[Any]) -> Window | None:
    packet = func.overloadpacket
    if packet in _CONVOLUTIONS:
        _maps, weight, _bias, stride, padding, dilation, transposed, _output_padding, groups = args[:9]
        kernel = tuple(weight.shape[2:])
        first, second = int(weight.shape[0]), int(weight.shape[1]) * groups
        channels = (first, second) if transposed else (second, first)
        return Window(
            kernel=kernel,
            stride=stride,
            padding=padding,
            dilation=dilation,
            groups=groups,
            channels=channels,
            channels_last=_runs_channels_last(args),
        )
    if packet in _POOLS_WITH_WINDOW:
        kernel = _expand(args[1], args[0].dim() - 2)
        stride = _expand(args[2], len(kernel)) if len(args) > 2 and args[2] else kernel
        padding = _expand(args[3], len(kernel)) if len(args) > 3 else (0,) * len(kernel)
        is_max = packet.__name__.startswith("max")
        dilation = _expand(args[4], len(kernel)) if is_max and len(args) > 4 else (1,) * len(kernel)
        return Window(kernel=kernel, stride=stride, padding=padding, dilation=dilation)
    return None


def _runs_channels_last(args: Sequence[Any]) -> bool:
    """A convolution torch runs channels last: its input or its weight laid out so, as its CPU and cuDNN
    kernels choose, which then lay out its output so too (its meta kernel does not: without this, ConvNeXt's
    first block of each stage read contiguous maps after the downsampling convolution)."""
    return _channels_last(args[0]) or _channels_last(args[1])


def _laid_channels_last(maps: Tensor) -> Tensor:
    """A meta tensor like ``maps`` with channels-last strides, a map of one pixel's too (``contiguous``
    keeps that one as it is: both layouts are contiguous)."""
    _batch, c, h, w = maps.shape
    return torch.empty_strided(maps.shape, (h * w * c, 1, w * c, c), dtype=maps.dtype, device=maps.device)


def _channels_last(maps: Tensor) -> bool:
    """A 4-d tensor laid out channels last, as torch's convolutions read its strides: on a map of one
    pixel, where both layouts are contiguous, by its channels' stride being the least."""
    if maps.dim() != 4 or not maps.is_contiguous(memory_format=torch.channels_last):
        return False
    return not maps.is_contiguous() or maps.stride(1) < maps.stride(3)


def _expand(value: int | Sequence[int], rank: int) -> tuple[int, ...]:
    """Pooling arguments may be one int, or a one-element list, meaning the same for every dimension."""
    values = (value,) if isinstance(value, int) else tuple(value)
    return values * rank if len(values) == 1 else values


def _shapes(tree: Any) -> list[TensorShape]:
    return [batch.per_sample_shape(t.shape) for t in tree_leaves(tree) if isinstance(t, Tensor)]


def _bytes(tensor: Tensor) -> Scaling:
    """Bytes a tensor spans; a broadcast view spans no more than its storage, batched only if that is."""
    span = tensor.numel() * tensor.element_size()
    held = tensor.untyped_storage().nbytes()
    if span <= held:
        return batch.cost(span, bool(batch.batch_dims(tensor.shape)))
    return batch.cost(held, held % batch.PROBE_BATCH == 0)


def _total(tensors: Iterable[Tensor]) -> Scaling:
    return sum((_bytes(t) for t in tensors), Scaling())


def _unpack(tensor: Tensor) -> Tensor:
    return tensor
