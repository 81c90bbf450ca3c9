"""CNNs and transformer blocks in no public zoo, built as a user's training script would: what
`benchmarks/architecture_transfer.py` predicts from their own measurements. Each takes a 3-channel 32x32
image and returns 10 logits."""

from __future__ import annotations

import torch
from torch import Tensor, nn


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


class _Patches(nn.Module):
    """An image as a sequence of patch tokens with learned positions (ViT's input, torch's own layers)."""

    def __init__(self, width: int, patch: int, side: int = 32) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, width, patch, stride=patch)
        self.positions = nn.Parameter(torch.zeros(1, (side // patch) ** 2, width))

    def forward(self, images: Tensor) -> Tensor:
        patches: Tensor = self.embed(images)
        return patches.flatten(2).transpose(1, 2) + self.positions


class _Classify(nn.Module):
    """Mean over the tokens, then 10 logits."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 10)

    def forward(self, tokens: Tensor) -> Tensor:
        normed: Tensor = self.norm(tokens)
        logits: Tensor = self.head(normed.mean(dim=1))
        return logits


def encoder() -> nn.Module:
    """Transformer blocks from torch's ``nn.TransformerEncoderLayer`` (pre-norm, GELU, 4 heads, 256 wide
    on 64 patch tokens): not Hugging Face's ViT, whose blocks the zoo has."""
    layer = nn.TransformerEncoderLayer(
        256, 4, dim_feedforward=1024, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
    )
    return nn.Sequential(
        _Patches(256, 4), nn.TransformerEncoder(layer, 3, enable_nested_tensor=False), _Classify(256)
    )


class _MixerBlock(nn.Module):
    """MLP-Mixer's block: an MLP across the tokens, then one across the channels, each after a norm."""

    def __init__(self, tokens: int, width: int) -> None:
        super().__init__()
        self.token_norm, self.channel_norm = nn.LayerNorm(width), nn.LayerNorm(width)
        self.tokens = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(), nn.Linear(2 * tokens, tokens))
        self.channels = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: Tensor) -> Tensor:
        across: Tensor = self.tokens(self.token_norm(x).transpose(1, 2))
        x = x + across.transpose(1, 2)
        along: Tensor = self.channels(self.channel_norm(x))
        return x + along


def mixer() -> nn.Module:
    """MLP-Mixer (no attention, no convolution past the patches): linears on tokens and on channels."""
    return nn.Sequential(_Patches(192, 4), *(_MixerBlock(64, 192) for _ in range(4)), _Classify(192))
