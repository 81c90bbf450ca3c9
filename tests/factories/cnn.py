"""Small CNNs built the way a user's training script would build them."""

from __future__ import annotations

import os
import signal

import torch
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self, width: int, depth: int, num_classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
        for _ in range(depth):
            layers += [
                nn.Conv2d(width, width, 3, padding=1, groups=width),
                nn.Conv2d(width, width, 1),
                nn.ReLU(),
            ]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


class UntilSmall(nn.Module):
    """Downsamples until the image is small: how often depends on the input, which tracing cannot follow."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.down = nn.Conv2d(width, width, 3, stride=2, padding=1)
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        while x.shape[-1] > 4:
            x = torch.relu(self.down(x)) + 1
        return self.head(x.mean(dim=(2, 3)))


class ValueDependent(nn.Module):
    """Branches on a tensor's value, which no meta-device introspection can know."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return y * 2 if y.mean() > 0 else y


def build(width: int = 8, depth: int = 2, num_classes: int = 10) -> nn.Module:
    return SmallCNN(width, depth, num_classes)


def build_until_small(width: int = 8) -> nn.Module:
    return UntilSmall(width)


def build_value_dependent() -> nn.Module:
    return ValueDependent()


def broken(width: int = 8) -> nn.Module:
    raise RuntimeError(f"cannot build a network {width} wide")


def greedy() -> nn.Module:
    """Reserves more address space than the introspection child may have (untouched: without the cap it
    costs nothing)."""
    hoard = torch.empty(10 * 2**30, dtype=torch.uint8, device="cpu")
    return nn.Linear(hoard.dim(), 1)


def not_a_module() -> object:
    return {"layers": 3}


def one_convolution(
    channels_in: int,
    channels_out: int,
    kernel: int,
    stride: int = 1,
    dilation: int = 1,
    groups: int = 1,
    transposed: bool = False,
) -> nn.Module:
    """A stem convolution, then the convolution under test: its input needs a gradient, as in a real net."""
    kind = nn.ConvTranspose2d if transposed else nn.Conv2d
    return nn.Sequential(
        nn.Conv2d(3, channels_in, 1, bias=False),
        kind(channels_in, channels_out, kernel, stride=stride, dilation=dilation, groups=groups, bias=False),
    )


class KilledInTraining(nn.Module):
    """Killed by its first real forward (a meta-device one, as introspection's, passes), as the kernel
    kills a process out of memory."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "meta":
            os.kill(os.getpid(), signal.SIGKILL)
        return self.conv(x).mean(dim=(2, 3))


def killed_in_training() -> nn.Module:
    return KilledInTraining()
