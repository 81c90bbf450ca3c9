"""Each op's benchmark configuration built as a torch workload: what `advisor.bench.measure` times.

Imported only where an op runs (a benchmark job, a test), never by the service: this is the registry's one
module that loads torch. A layer's workload is its forward and its backward, the input's gradient included
(as inside a network); an optimizer's is its step over parameters whose gradients are set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib import import_module

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from advisor.ops.known import op_of
from advisor.records import LayerConfig
from advisor.runtime.step import device_autocast

Module = tuple[nn.Module, tuple[Tensor, ...]]
"""A layer and its inputs, on the CPU; the floating ones that are activations need their gradient."""


@dataclass(frozen=True)
class Workload:
    reset: Callable[[], None]
    """Untimed, before each repeat: the previous repeat's gradients dropped."""
    run: Callable[[], None]


def build(config: LayerConfig, device: torch.device) -> Workload:
    """``config``'s op's workload on ``device``, by its registry entry's builder."""
    path, name = op_of(config).builder.split(":")
    builder: Callable[[LayerConfig, torch.device], Workload] = getattr(import_module(path), name)
    return builder(config, device)


def layer_workload(built: Module, config: LayerConfig, device: torch.device) -> Workload:
    """Forward under autocast where ``config.amp`` (as a training job runs it), then backward from a
    gradient of ones."""
    module, inputs = built
    module = module.to(device)
    inputs = tuple(t.to(device).requires_grad_(t.is_floating_point()) for t in inputs)
    dtype = device_autocast("bf16", device).dtype
    with torch.autocast(device.type, dtype=dtype, enabled=config.amp):
        gradient = torch.ones_like(module(*inputs))

    def reset() -> None:
        module.zero_grad(set_to_none=True)
        for tensor in inputs:
            tensor.grad = None

    def run() -> None:
        with torch.autocast(device.type, dtype=dtype, enabled=config.amp):
            outputs = module(*inputs)
        outputs.backward(gradient)

    return Workload(reset, run)


def _maps(c: LayerConfig) -> Tensor:
    """A convolution's input, laid out as its network hands it on (`LayerConfig.channels_last`): permuted
    from channels last, as ConvNeXt's blocks do, which a map of one pixel keeps too (``contiguous`` would
    leave it as it is, both layouts being contiguous, and oneDNN runs the two on different kernels)."""
    if c.channels_last:
        return torch.randn(c.batch, c.height, c.width, c.in_channels).permute(0, 3, 1, 2)
    return torch.randn(c.batch, c.in_channels, c.height, c.width)


def _rows(c: LayerConfig) -> Tensor:
    return torch.randn(c.batch, c.height, c.width, c.in_channels)


def convolution(c: LayerConfig, device: torch.device) -> Workload:
    conv = nn.Conv2d(c.in_channels, c.out_channels, c.kernel, c.stride, c.padding, c.dilation, c.groups)
    return layer_workload((conv, (_maps(c),)), c, device)


def transposed_convolution(c: LayerConfig, device: torch.device) -> Workload:
    conv = nn.ConvTranspose2d(
        c.in_channels, c.out_channels, c.kernel, c.stride, c.padding, groups=c.groups, dilation=c.dilation
    )
    return layer_workload((conv, (_maps(c),)), c, device)


def linear(c: LayerConfig, device: torch.device) -> Workload:
    """A linear's rows per sample are ``height * width``."""
    return layer_workload((nn.Linear(c.in_channels, c.out_channels), (_rows(c),)), c, device)


class _Apply(nn.Module):
    """A function of activations alone as a module (a product, attention, an add)."""

    def __init__(self, function: Callable[..., Tensor]) -> None:
        super().__init__()
        self.function = function

    def forward(self, *inputs: Tensor) -> Tensor:
        return self.function(*inputs)


def matrix_product(c: LayerConfig, device: torch.device) -> Workload:
    a = torch.randn(c.batch, c.width, c.height, c.in_channels)
    b = torch.randn(c.batch, c.width, c.in_channels, c.out_channels)
    return layer_workload((_Apply(torch.matmul), (a, b)), c, device)


def attention(c: LayerConfig, device: torch.device) -> Workload:
    return layer_workload((_Apply(F.scaled_dot_product_attention), _heads(c)), c, device)


MATH_DROPOUT = 0.1
"""GPT-2's and BERT's attention dropout."""


def math_attention(c: LayerConfig, device: torch.device) -> Workload:
    """With dropout on the weights, as GPT-2 and BERT train: a CPU runs it on the math path."""
    attend = partial(F.scaled_dot_product_attention, dropout_p=MATH_DROPOUT)
    return layer_workload((_Apply(attend), _heads(c)), c, device)


def _heads(c: LayerConfig) -> tuple[Tensor, Tensor, Tensor]:
    q = torch.randn(c.batch, c.groups, c.height, c.in_channels)
    k = torch.randn(c.batch, c.groups, c.width, c.in_channels)
    v = torch.randn(c.batch, c.groups, c.width, c.out_channels)
    return q, k, v


def batch_norm(c: LayerConfig, device: torch.device) -> Workload:
    return layer_workload((nn.BatchNorm2d(c.in_channels), (_maps(c),)), c, device)


def small_maps(c: LayerConfig, device: torch.device) -> Workload:
    """Batch norm over ``width`` samples of ``in_channels`` maps of ``height`` positions: a small-map
    sweep's configuration (`advisor.ops.configs.swept_small_maps`)."""
    maps = torch.randn(c.width, c.in_channels, c.height, 1)
    return layer_workload((nn.BatchNorm2d(c.in_channels), (maps,)), c, device)


def group_norm(c: LayerConfig, device: torch.device) -> Workload:
    return layer_workload((nn.GroupNorm(c.groups, c.in_channels), (_maps(c),)), c, device)


def layer_norm(c: LayerConfig, device: torch.device) -> Workload:
    return layer_workload((nn.LayerNorm(c.in_channels), (_rows(c),)), c, device)


def rms_norm(c: LayerConfig, device: torch.device) -> Workload:
    return layer_workload((nn.RMSNorm(c.in_channels), (_rows(c),)), c, device)


def softmax(c: LayerConfig, device: torch.device) -> Workload:
    return layer_workload((nn.Softmax(dim=-1), (_rows(c),)), c, device)


def activation(c: LayerConfig, device: torch.device) -> Workload:
    return layer_workload((nn.ReLU(), (_maps(c),)), c, device)


def dropout(c: LayerConfig, device: torch.device) -> Workload:
    return layer_workload((nn.Dropout(0.1), (_maps(c),)), c, device)


def elementwise(c: LayerConfig, device: torch.device) -> Workload:
    return layer_workload((_Apply(torch.add), (_maps(c), _maps(c))), c, device)


def pooling(c: LayerConfig, device: torch.device) -> Workload:
    pool = nn.MaxPool2d(c.kernel, c.stride, c.padding, c.dilation)
    return layer_workload((pool, (_maps(c),)), c, device)


def embedding(c: LayerConfig, device: torch.device) -> Workload:
    tokens = torch.randint(0, c.in_channels, (c.batch, c.height * c.width))
    return layer_workload((nn.Embedding(c.in_channels, c.out_channels), (tokens,)), c, device)


def cross_entropy(c: LayerConfig, device: torch.device) -> Workload:
    logits = torch.randn(c.batch * c.height * c.width, c.in_channels)
    targets = torch.randint(0, c.in_channels, (c.batch * c.height * c.width,))
    return layer_workload((nn.CrossEntropyLoss(), (logits, targets)), c, device)


class _Chain(nn.Module):
    """``length`` multiplies in a row: as many kernels forward, and as many backward."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.length = length

    def forward(self, x: Tensor) -> Tensor:
        for _ in range(self.length):
            x = x * 1.0001
        return x


def launch_chain(c: LayerConfig, device: torch.device) -> Workload:
    return layer_workload((_Chain(c.height), (torch.randn(c.batch, c.width),)), c, device)


class _Multiply(nn.Module):
    """One of the launch chain's multiplies as a module of its own: a network calls each layer so."""

    def forward(self, x: Tensor) -> Tensor:
        return x * 1.0001


def module_chain(c: LayerConfig, device: torch.device) -> Workload:
    chain = nn.Sequential(*(_Multiply() for _ in range(c.height)))
    return layer_workload((chain, (torch.randn(c.batch, c.width),)), c, device)


class _Add(nn.Module):
    """An element-wise add of two activations (a residual's) as a module of its own."""

    def forward(self, x: Tensor) -> Tensor:
        return x + x


def _identity_conv(channels: int) -> nn.Module:
    conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
    nn.init.dirac_(conv.weight)
    return conv


def _identity_linear(features: int) -> nn.Module:
    linear = nn.Linear(features, features)
    nn.init.eye_(linear.weight)
    return linear


_TINY: dict[str, Callable[[int], nn.Module]] = {
    "tiny_conv2d": _identity_conv,
    "tiny_linear": _identity_linear,
    "tiny_batch_norm": nn.BatchNorm2d,
    "tiny_activation": lambda _c: nn.ReLU(),
    "tiny_elementwise": lambda _c: _Add(),
    "tiny_pooling": lambda _c: nn.MaxPool2d(3, 1, 1),
}
"""Each tiny layer kind as a network builds it (a convolution before a norm has no bias), shapes kept; the
weighted ones start as the identity, so a long chain's values and gradients never shrink into subnormal
floats, which a CPU computes slowly."""


def tiny_chain(c: LayerConfig) -> Module:
    """``height`` tiny layers of ``c.op``'s kind in a ``Sequential``, and its input: ``in_channels`` values
    (a linear's) or maps of ``width`` x ``width``."""
    chain = nn.Sequential(*(_TINY[c.op](c.in_channels) for _ in range(c.height)))
    shape = (c.batch, c.in_channels) if c.op == "tiny_linear" else (c.batch, c.in_channels, c.width, c.width)
    return chain, (torch.randn(*shape),)


def tiny_layers(c: LayerConfig, device: torch.device) -> Workload:
    """A tiny-layer chain's forward and backward (`tiny_chain`)."""
    return layer_workload(tiny_chain(c), c, device)


def _update(
    c: LayerConfig, device: torch.device, make: Callable[[list[Tensor]], torch.optim.Optimizer]
) -> Workload:
    """``width`` parameter tensors of ``height`` each, their gradients set (a network's are many tensors)."""
    parameters: list[Tensor] = [nn.Parameter(torch.randn(c.height, device=device)) for _ in range(c.width)]
    for parameter in parameters:
        parameter.grad = torch.randn_like(parameter)
    optimizer = make(parameters)
    optimizer.step()  # its state exists before the first timed step

    def nothing() -> None:
        return None

    def step() -> None:
        optimizer.step()

    return Workload(nothing, step)


def grad_release(c: LayerConfig, device: torch.device) -> Workload:
    """``width`` gradients of ``height`` each, written as a backward writes them, then set to None as a
    training step's ``zero_grad`` does: the layer benchmarks free theirs untimed, between runs."""
    parameters: list[Tensor] = [nn.Parameter(torch.zeros(c.height, device=device)) for _ in range(c.width)]
    optimizer = torch.optim.SGD(parameters, lr=0.01)

    def written() -> None:
        for parameter in parameters:
            parameter.grad = torch.ones_like(parameter)

    def release() -> None:
        optimizer.zero_grad(set_to_none=True)

    return Workload(written, release)


def sgd_momentum(c: LayerConfig, device: torch.device) -> Workload:
    return _update(c, device, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9))


def adam(c: LayerConfig, device: torch.device) -> Workload:
    return _update(c, device, lambda p: torch.optim.Adam(p, lr=1e-3))


def adamw(c: LayerConfig, device: torch.device) -> Workload:
    return _update(c, device, lambda p: torch.optim.AdamW(p, lr=1e-3))
