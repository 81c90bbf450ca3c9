"""CNNs in no public zoo, built as a user's training script would: what `benchmarks/architecture_transfer.py`
predicts from their own measurements. Each takes a 3-channel image and returns 10 logits."""

from __future__ import annotations

from torch import nn


def _block(channels_in: int, channels_out: int, kernel: int, dilation: int = 1) -> list[nn.Module]:
    padding = dilation * (kernel - 1) // 2
    return [
        nn.Conv2d(channels_in, channels_out, kernel, padding=padding, dilation=dilation, bias=False),
        nn.BatchNorm2d(channels_out),
        nn.ReLU(inplace=True),
    ]


def vgg5x5() -> nn.Module:
    """VGG's shape with 5x5 kernels, which no zoo model uses."""
    return nn.Sequential(
        *_block(3, 32, 5),
        nn.MaxPool2d(2),
        *_block(32, 64, 5),
        nn.MaxPool2d(2),
        *_block(64, 128, 5),
        *_block(128, 128, 5),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(128, 10),
    )


def dilated() -> nn.Module:
    """Dilated 3x3 convolutions at full resolution, as in segmentation backbones."""
    return nn.Sequential(
        *_block(3, 32, 3),
        *_block(32, 64, 3, dilation=2),
        *_block(64, 64, 3, dilation=4),
        *_block(64, 64, 3, dilation=8),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )
