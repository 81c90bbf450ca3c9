"""What each op costs at its benchmark configuration: forward and backward FLOPs and bytes, counted by hand.

Pure arithmetic on a `LayerConfig` (whose fields each op reads as its entry in `advisor.ops.known` says),
at ``config.batch`` samples. Conventions, one for every op:

- a multiply-add is 2 FLOPs; an element-wise or reducing step is 1 FLOP per element it touches;
- backward is every gradient a layer inside a network computes: its input's and its weights' (a grouped
  convolution's weight gradient costs what its forward does, not ``groups`` times that, as torch 2.14's
  ``FlopCounterMode`` counts it); a bias gradient is a sum over its output;
- bytes are what a kernel reads plus what it writes, 4 per element (FP32) whatever the precision: the
  layer model learns mixed precision's effect from its own flag;
- a vector op (norm, activation, softmax...) is so many FLOPs and element moves per element
  (`VectorRates`), a fused kernel's passes over its tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from advisor.records import LayerConfig

ELEMENT_BYTES = 4
_INDEX_BYTES = 8


@dataclass(frozen=True)
class Cost:
    forward_flops: float
    backward_flops: float
    forward_bytes: float
    backward_bytes: float

    @property
    def train_flops(self) -> float:
        return self.forward_flops + self.backward_flops


def output_side(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return max(1, (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1)


def _out_positions(c: LayerConfig) -> int:
    sides = zip((c.height, c.width), c.kernel, c.stride, c.padding, c.dilation, strict=True)
    return prod(output_side(*side) for side in sides)


def _weighted(forward: float, inputs: int, weights: int, outputs: int) -> Cost:
    """A layer with weights: backward computes the input and the weight gradient, each the forward's
    multiply-adds, reading dy, x and w and writing dx and dw."""
    return Cost(
        forward_flops=forward,
        backward_flops=2 * forward,
        forward_bytes=float(ELEMENT_BYTES * (inputs + weights + outputs)),
        backward_bytes=float(ELEMENT_BYTES * (outputs + inputs + weights + inputs + weights)),
    )


def convolution(c: LayerConfig) -> Cost:
    """A 2-d convolution, dense, grouped or depthwise: each output position multiplies one group's input
    channels by the kernel."""
    taps = (c.in_channels // c.groups) * c.kernel[0] * c.kernel[1]
    outputs = c.batch * c.out_channels * _out_positions(c)
    inputs = c.batch * c.in_channels * c.height * c.width
    return _weighted(2.0 * outputs * taps, inputs, c.out_channels * taps, outputs)


def transposed_convolution(c: LayerConfig) -> Cost:
    """Runs as the direct convolution over its input's positions (the gradient of a convolution): every
    input position meets the whole ``in x out / groups x kernel`` weight once."""
    weights = c.in_channels * (c.out_channels // c.groups) * c.kernel[0] * c.kernel[1]
    positions = c.height * c.width
    inputs = c.batch * c.in_channels * positions
    outputs = c.batch * c.out_channels * positions * c.stride[0] * c.stride[1]
    return _weighted(2.0 * c.batch * positions * weights, inputs, weights, outputs)


def linear(c: LayerConfig) -> Cost:
    """``height x width`` rows per sample times an ``in x out`` weight; bias adds are not counted."""
    rows = c.batch * c.height * c.width
    forward = 2.0 * rows * c.in_channels * c.out_channels
    return _weighted(forward, rows * c.in_channels, c.in_channels * c.out_channels, rows * c.out_channels)


def matrix_product(c: LayerConfig) -> Cost:
    """``width`` products per sample of ``(height x in) @ (in x out)``, both operands activations:
    backward is both operands' gradients, each the forward's multiply-adds."""
    count = c.batch * c.width
    m, k, n = c.height, c.in_channels, c.out_channels
    operands, result = count * (m * k + k * n), count * m * n
    forward = 2.0 * count * m * k * n
    return Cost(
        forward_flops=forward,
        backward_flops=2 * forward,
        forward_bytes=ELEMENT_BYTES * (operands + result),
        backward_bytes=ELEMENT_BYTES * (result + 2 * operands),
    )


_FUSED_POINTWISE = 2
"""FLOPs a pair of the fused backward's two pointwise passes (``exp(S - lse)``, ``P (dP - D)``) each take."""


def attention(c: LayerConfig) -> Cost:
    """Scaled-dot-product attention as the fused (flash) kernel runs it, ``groups`` heads per sample,
    ``height`` queries, ``width`` keys, key dimension ``in_channels``, value dimension ``out_channels``:
    forward the math path's products and softmax, the scores never written, Q, K and V read, the output and
    a log-sum-exp per query written. Backward: the scores recomputed (``Q K^T``, ``exp(S - lse)``), ``dV``
    and ``dP``, ``D = rowsum(dO * O)``, ``dS = P (dP - D)``, ``dQ`` and ``dK``; Q, K, V, O, dO and the
    log-sum-exp read, dQ, dK and dV written. A causal call is counted whole: this project's CPU kernel
    takes as long with it (benchmarks/README.md)."""
    heads = c.batch * c.groups
    queries, keys, e, ev = c.height, c.width, c.in_channels, c.out_channels
    pairs = queries * keys
    q, k, v, o = queries * e, keys * e, keys * ev, queries * ev
    forward = 2.0 * pairs * e + SOFTMAX.forward_flops * pairs + 2.0 * pairs * ev
    backward = pairs * (6.0 * e + 4.0 * ev + 2.0 * _FUSED_POINTWISE) + 2.0 * queries * ev
    return Cost(
        forward_flops=heads * forward,
        backward_flops=heads * backward,
        forward_bytes=float(ELEMENT_BYTES * heads * (q + k + v + o + queries)),
        backward_bytes=float(ELEMENT_BYTES * heads * (2 * (q + k + v) + 2 * o + queries)),
    )


def math_attention(c: LayerConfig) -> Cost:
    """Scaled-dot-product attention as the math path runs it (`attention`'s fields): scores
    ``Q K^T``, their softmax (`SOFTMAX`'s rates) and ``P V``, each written out. Backward: ``dV = P^T dO``,
    ``dP = dO V^T``, the softmax's gradient, ``dQ = dS K`` and ``dK = dS^T Q``."""
    heads = c.batch * c.groups
    queries, keys, e, ev = c.height, c.width, c.in_channels, c.out_channels
    scores = queries * keys
    q, k, v, o = queries * e, keys * e, keys * ev, queries * ev
    forward = 2.0 * scores * e + SOFTMAX.forward_flops * scores + 2.0 * scores * ev
    backward = 4.0 * scores * ev + SOFTMAX.backward_flops * scores + 4.0 * scores * e
    # Forward: read Q, K (write S), the softmax's passes over S (write P), read P, V (write O).
    moved = (q + k + scores) + SOFTMAX.forward_moves * scores + (scores + v + o)
    # Backward: dV and dP from P, dO, V; the softmax's gradient; dQ and dK from dS, K, Q.
    moved_back = (2 * scores + 2 * o + 2 * v) + SOFTMAX.backward_moves * scores
    moved_back += 2 * scores + 2 * k + 2 * q
    return Cost(
        forward_flops=heads * forward,
        backward_flops=heads * backward,
        forward_bytes=float(ELEMENT_BYTES * heads * moved),
        backward_bytes=float(ELEMENT_BYTES * heads * moved_back),
    )


@dataclass(frozen=True)
class VectorRates:
    """A bandwidth-bound op's FLOPs and element moves (reads plus writes) per element of its tensor."""

    forward_flops: int
    backward_flops: int
    forward_moves: int
    backward_moves: int
    parameters_per_channel: int = 0
    """Weights per normalised channel (scale and shift), read forward; backward reads them and writes
    their gradients."""


NORM = VectorRates(7, 13, 3, 5, parameters_per_channel=2)
"""Batch, layer and group norm. Forward 7: statistics (sum, square, sum), normalise (subtract, scale),
affine (scale, shift); x read twice (statistics, normalise), y written. Backward 13: ``dy * gamma``, its sum,
times x-hat, that sum, x-hat again (2), the input gradient's two subtractions, scale and a multiply
(4), and ``dgamma``, ``dbeta`` (3); dy and x read twice, dx written."""
RMS_NORM = VectorRates(4, 9, 3, 5, parameters_per_channel=1)
"""Forward 4: square, sum, scale, gamma. Backward 9: ``dy * gamma``, times x, sum, the input gradient
(4), ``dgamma`` (2)."""
ACTIVATION = VectorRates(1, 1, 2, 3)
"""ReLU-like: one step forward (x read, y written), one masking multiply backward (dy and x read, dx
written)."""
ELEMENTWISE = VectorRates(1, 1, 3, 3)
"""A binary op (a residual's add): two operands read, one written; backward, the gradient's accumulation
where the branches meet (two read, one written)."""
DROPOUT = VectorRates(3, 2, 3, 3)
"""Draw, compare, scale; x read, y and the mask written. Backward: mask and scale, dy and mask read."""
SOFTMAX = VectorRates(5, 4, 3, 5)
"""Over rows of ``in_channels``: max, subtract, exp, sum, divide; x read twice (max and sum, normalise),
y written. Backward ``y * (dy - sum(dy * y))``: multiply, sum, subtract, multiply; y and dy read twice."""
CROSS_ENTROPY = VectorRates(5, 2, 3, 2)
"""The loss over ``in_channels`` classes: log-softmax (max, subtract, exp, sum, subtract) then the target's
pick (one per row: left out); backward ``softmax - onehot`` scaled by 1/batch: exp and scale, log-probs
read, gradient written."""


def elements(c: LayerConfig) -> int:
    """A vector op's tensor: ``in_channels`` features at ``height x width`` positions per sample."""
    return c.batch * c.in_channels * c.height * c.width


def vector(rates: VectorRates, c: LayerConfig) -> Cost:
    n = elements(c)
    weights = rates.parameters_per_channel * c.in_channels
    return Cost(
        forward_flops=float(rates.forward_flops * n),
        backward_flops=float(rates.backward_flops * n),
        forward_bytes=float(ELEMENT_BYTES * (rates.forward_moves * n + weights)),
        backward_bytes=float(ELEMENT_BYTES * (rates.backward_moves * n + 3 * weights)),
    )


def pooling(c: LayerConfig) -> Cost:
    """A window pool over ``in_channels`` maps: one compare or add per window element; backward routes (max)
    or spreads (average) each output's gradient over its window, as many steps."""
    outputs = c.batch * c.in_channels * _out_positions(c)
    inputs = c.batch * c.in_channels * c.height * c.width
    steps = float(outputs * c.kernel[0] * c.kernel[1])
    return Cost(
        forward_flops=steps,
        backward_flops=steps,
        forward_bytes=float(ELEMENT_BYTES * (inputs + outputs)),
        backward_bytes=float(ELEMENT_BYTES * (outputs + inputs)),
    )


def embedding(c: LayerConfig) -> Cost:
    """A lookup of ``height`` tokens per sample in an ``in_channels x out_channels`` table: no arithmetic
    forward (indices read, rows read and written); backward zeroes the table's dense gradient and adds each
    token's gradient row into it (read, read and write)."""
    tokens = c.batch * c.height * c.width
    rows = tokens * c.out_channels
    table = c.in_channels * c.out_channels
    return Cost(
        forward_flops=0.0,
        backward_flops=float(rows),
        forward_bytes=float(_INDEX_BYTES * tokens + ELEMENT_BYTES * 2 * rows),
        backward_bytes=float(_INDEX_BYTES * tokens + ELEMENT_BYTES * (table + 3 * rows)),
    )


@dataclass(frozen=True)
class UpdateRates:
    """An optimizer's update per parameter: FLOPs, and elements read plus written (parameter, gradient
    and state)."""

    flops: int
    moves: int


SGD_MOMENTUM = UpdateRates(4, 5)
"""``buf = momentum * buf + g`` (2), ``p -= lr * buf`` (2); p, g, buf read, buf and p written."""
ADAM = UpdateRates(14, 7)
"""``m = b1 m + (1 - b1) g`` (3), ``v = b2 v + (1 - b2) g^2`` (4), ``p -= lr * (m / c1) / (sqrt(v / c2) +
eps)`` (7); p, g, m, v read, p, m, v written."""
ADAMW = UpdateRates(15, 7)
"""Adam's 14 and the decoupled decay ``p *= 1 - lr * wd``, fused into the same pass."""
GRAD_RELEASE = UpdateRates(0, 1)
"""``zero_grad(set_to_none=True)`` after the step: no arithmetic; each gradient's memory handed back."""


def update(rates: UpdateRates, c: LayerConfig) -> Cost:
    """An optimizer step over ``height`` parameters, once per step whatever the batch: all of it forward."""
    n = c.height * c.width
    return Cost(
        forward_flops=float(rates.flops * n),
        backward_flops=0.0,
        forward_bytes=float(ELEMENT_BYTES * rates.moves * n),
        backward_bytes=0.0,
    )


def launch_chain(c: LayerConfig) -> Cost:
    """``height`` tiny multiplies in a row, each on ``width`` elements, and their ``height`` gradients: a
    chain whose time is its launches, what each op costs beyond its arithmetic (dispatch, a kernel
    launch); each op reads and writes its elements."""
    return _once_each_way(c.batch * c.height * c.width)


def tiny_chain(c: LayerConfig) -> Cost:
    """``height`` tiny layers of ``in_channels`` maps of ``width`` x ``width``: each reads and writes its
    elements once each way, a floor to plan by (its time is what a layer pays beyond its arithmetic)."""
    return _once_each_way(c.batch * c.height * c.in_channels * c.width * c.width)


def _once_each_way(n: int) -> Cost:
    """``n`` elements, one FLOP each way, each read and written forward and backward."""
    return Cost(
        forward_flops=float(n),
        backward_flops=float(n),
        forward_bytes=float(ELEMENT_BYTES * 2 * n),
        backward_bytes=float(ELEMENT_BYTES * 2 * n),
    )
