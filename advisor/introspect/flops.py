"""FLOPs of convolutions and of the matrix products of linear layers, counted by the project's own formulas:
2 FLOPs per multiply-add, every gradient that autograd asks for and none that it does not.

torch 2.14's ``flop_registry`` charges a grouped convolution's weight gradient as if the convolution were
dense: ``groups`` times too many (a depthwise layer's backward comes out tens of times its forward; fixed
upstream later). Every other op keeps torch's formula.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

aten = torch.ops.aten


def convolution(x: Sequence[int], weight: Sequence[int], out: Sequence[int], transposed: bool) -> int:
    """A (transposed) convolution: each position of the direct convolution's output multiplies one group's
    input channels by the kernel. The weight's shape already holds the channels of one group (dense:
    ``(C_out, C_in / groups, *kernel)``, transposed: ``(C_in, C_out / groups, *kernel)``), and a transposed
    convolution runs directly over its input's positions."""
    positions = x[2:] if transposed else out[2:]
    return 2 * x[0] * math.prod(weight) * math.prod(positions)


def convolution_backward(
    grad_out: Sequence[int], x: Sequence[int], weight: Sequence[int], transposed: bool, mask: Sequence[bool]
) -> int:
    """The input gradient and the weight gradient each take exactly the forward's multiply-adds (each forward
    product meets one gradient product); the bias gradient is a sum, as torch counts it: nothing."""
    each = convolution(x, weight, grad_out, transposed)
    return each * (int(mask[0]) + int(mask[1]))


def matrix_product(a: Sequence[int], b: Sequence[int]) -> int:
    """``(..., m, k) @ (..., k, n)``: m x n x k multiply-adds per matrix of the batch."""
    return 2 * math.prod(a[:-1]) * a[-1] * b[-1]


def attention(query: Sequence[int], key: Sequence[int], value: Sequence[int], causal: bool) -> int:
    """Scaled dot-product attention's forward: ``Q K^T`` (E multiply-adds per query-key pair) and
    ``P V`` (Ev per pair) for each of the query's heads, grouped-query keys and values serving several
    heads as the kernel reads them (no copies). A causal call computes only the pairs at or below the
    diagonal, as torch aligns it (query i sees keys 0..i); softmax, scale and mask are element-wise and
    count nothing. The backward takes twice this (``dV``, ``dP``, ``dQ``, ``dK``: one product each)."""
    *batch, length_q, embed = query
    length_k, embed_v = key[-2], value[-1]
    seen = min(length_q, length_k)
    pairs = seen * (seen + 1) // 2 + (length_q - seen) * length_k if causal else length_q * length_k
    return 2 * math.prod(batch) * pairs * (embed + embed_v)


def _shape(tensor: Any) -> tuple[int, ...]:
    return tuple(int(side) for side in tensor.shape)


def _conv(args: Sequence[Any], out: Any) -> int:
    return convolution(_shape(args[0]), _shape(args[1]), _shape(out), bool(args[6]))


def _conv_backward(args: Sequence[Any], _out: Any) -> int:
    grad_out, x, weight = (_shape(t) for t in args[:3])
    return convolution_backward(grad_out, x, weight, bool(args[7]), args[10])


OWN: dict[Any, Callable[[Sequence[Any], Any], int]] = {
    aten.convolution: _conv,
    aten._convolution: _conv,
    aten.convolution_overrideable: _conv,
    aten.convolution_backward: _conv_backward,
    aten.mm: lambda args, _out: matrix_product(_shape(args[0]), _shape(args[1])),
    aten.bmm: lambda args, _out: matrix_product(_shape(args[0]), _shape(args[1])),
    aten.addmm: lambda args, _out: matrix_product(_shape(args[1]), _shape(args[2])),
    aten.baddbmm: lambda args, _out: matrix_product(_shape(args[1]), _shape(args[2])),
}
"""The ops counted here, by overload packet; arguments as the dispatcher passes them (positional)."""
