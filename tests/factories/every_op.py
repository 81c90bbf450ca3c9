"""A small network with a layer of each op kind the introspection sees in an image model, for the op
registry's tests."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class EveryOp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.grouped = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.gn = nn.GroupNorm(2, 8)
        self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.pool = nn.MaxPool2d(2)
        self.drop = nn.Dropout(0.1)
        self.ln = nn.LayerNorm(8)
        self.rms = nn.RMSNorm(8)
        self.proj = nn.Linear(8, 24)
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.dense(x)))
        x = self.depthwise(self.grouped(x)) + x[:, :, ::2, ::2]
        x = self.pool(self.up(self.gn(x)))
        tokens = self.rms(self.ln(self.drop(x).flatten(2).transpose(1, 2)))
        q, k, v = self.proj(tokens).unflatten(-1, (3, 2, 4)).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
        mixed = torch.softmax(attended @ attended.transpose(1, 2), dim=-1) @ attended
        return self.head(mixed.mean(1))
