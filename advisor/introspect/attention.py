"""Attention calls as layers of their own, and ``scaled_dot_product_attention`` costed as the fused kernel
that runs it in training, not as the math path the meta device decomposes it into.

On a GPU (and in PyTorch's CPU flash kernel) a direct ``scaled_dot_product_attention`` call never
materialises the ``[batch, heads, Lq, Lk]`` scores, nor a dropout mask over them, nor grouped-query keys
repeated to every head: it reads Q, K and V, writes the output and a log-sum-exp per query row, and saves
those five for the backward. A causal call skips the pairs above the diagonal. Its FLOPs are
`advisor.introspect.flops.attention`'s, forward and backward. ``multi_head_attention_forward`` (and an
attention call inside another attention layer or a leaf module) stays as its ops count it.

A CPU's kernel takes neither dropout on the weights nor a mask that takes a gradient: such a call runs
torch's math path there, which the layer records (``Layer.math_path``) for the op registry to price; its
table costs stay the fused kernel's, as a GPU runs it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode

from advisor.introspect import batch, flops
from advisor.introspect.table import Scaling

_ATTENTION_FUNCTIONS = frozenset({F.scaled_dot_product_attention, F.multi_head_attention_forward})
_FP32 = 4
_NEED_WEIGHTS = 15
"""``need_weights``' position in ``multi_head_attention_forward``'s arguments."""
_lse_keys = itertools.count(-1, -1)
"""Keys for the log-sum-exp a fused kernel saves, which no tensor of the math path stands for."""


class Costed(Protocol):
    """The layer being recorded, as far as a fused call sets its costs."""

    formula: bool
    math_path: bool
    forward_flops: Scaling
    backward_flops: Scaling
    bytes_read: Scaling
    bytes_written: Scaling


class Recording(Protocol):
    """What the recorder lends an attention call."""

    attention_depth: int
    saved: dict[int, Scaling]

    def save(self, tensor: Tensor) -> None: ...

    @property
    def scope(self) -> str: ...

    @property
    def group(self) -> Costed | None: ...

    def open(self, name: str, op: str, args: Any) -> None: ...

    def close(self, output: Any) -> None: ...


class AttentionScope(TorchFunctionMode):
    """Makes each attention call one layer; torch's math path would otherwise show bare matmuls."""

    def __init__(self, recorder: Recording) -> None:
        super().__init__()
        self._recorder = recorder

    def __torch_function__(
        self, func: Any, types: Sequence[type], args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func not in _ATTENTION_FUNCTIONS:
            return func(*args, **kwargs)
        if _projects_to_fused(func, args, kwargs):
            with _fused_calls_seen(self):
                return func(*args, **kwargs)
        recorder = self._recorder
        fused = func is F.scaled_dot_product_attention and recorder.group is None
        recorder.open(recorder.scope, func.__name__, args[:3])
        layer = recorder.group
        assert layer is not None
        layer.formula = layer.formula or fused
        saved_before = set(recorder.saved)
        recorder.attention_depth += 1
        try:
            out = func(*args, **kwargs)
        finally:
            recorder.attention_depth -= 1
        if fused:
            _fused_costs(recorder, saved_before, layer, args, kwargs, out)
            layer.math_path = _math_path(args, kwargs)
        recorder.close(out)
        return out


def _projects_to_fused(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """``multi_head_attention_forward`` without attention weights (ViT's, ``nn.TransformerEncoderLayer``'s)
    is its in-projection, a ``scaled_dot_product_attention`` call on per-head queries, keys and values, and
    its out-projection: left to record as those, the attention layer has its heads and the fused kernel's
    costs, the projections are linear layers. Asked for its weights, it runs the math path: one layer."""
    if func is not F.multi_head_attention_forward:
        return False
    needs = kwargs.get("need_weights", args[_NEED_WEIGHTS] if len(args) > _NEED_WEIGHTS else True)
    return not needs


@contextmanager
def _fused_calls_seen(mode: TorchFunctionMode) -> Iterator[None]:
    """The mode is off inside its own handler, so the ``scaled_dot_product_attention`` call in
    ``multi_head_attention_forward`` (a global of ``torch.nn.functional``) is put back under it meanwhile."""
    plain = F.scaled_dot_product_attention

    def seen(*args: Any, **kwargs: Any) -> Any:
        with mode:
            return plain(*args, **kwargs)

    F.scaled_dot_product_attention = seen
    try:
        yield
    finally:
        F.scaled_dot_product_attention = plain


def _math_path(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether a CPU runs this ``scaled_dot_product_attention`` call on its math path (its flash kernel
    takes no dropout and no mask gradient: `torch._fused_sdp_choice`)."""
    mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
    dropout = kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0)
    return float(dropout) > 0 or (isinstance(mask, Tensor) and mask.requires_grad)


def _fused_costs(
    recorder: Recording,
    saved_before: set[int],
    layer: Costed,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    out: Tensor,
) -> None:
    """What the fused kernel reads, writes, saves and computes, in place of the math path's figures."""
    query, key, value = args[:3]
    causal = bool(kwargs.get("is_causal", args[5] if len(args) > 5 else False))
    saved = recorder.saved
    for stale in set(saved) - saved_before:
        del saved[stale]
    for tensor in (query, key, value, out):
        recorder.save(tensor)
    rows = query.numel() // query.shape[-1]
    saved[next(_lse_keys)] = batch.cost(rows * _FP32, True)
    shapes = [tuple(int(side) for side in t.shape) for t in (query, key, value)]
    forward = flops.attention(shapes[0], shapes[1], shapes[2], causal)
    layer.forward_flops = batch.cost(forward, True)
    layer.backward_flops = batch.cost(2 * forward, True)
    layer.bytes_read = _bytes(query) + _bytes(key) + _bytes(value)
    layer.bytes_written = _bytes(out)


def _bytes(tensor: Tensor) -> Scaling:
    return batch.cost(tensor.numel() * tensor.element_size(), bool(batch.batch_dims(tensor.shape)))
