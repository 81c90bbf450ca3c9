"""The transformer family of the zoo (`advisor.bench.zoo.SEQUENCE_ZOO`) as the benchmark trains it and as
introspection counts it: one Hugging Face step module, built by the same code both times
(`advisor.introspect.builders`), random weights, random token ids below the vocabulary (or random images
for ViT), AdamW. An edge (torch); transformers loads only where a family member is built, and the
benchmark engine (`advisor.bench.training`) only where one is trained.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from advisor.bench.zoo import ZooModel, zoo_model
from advisor.introspect import LayerTable
from advisor.introspect.table import TrainingSettings
from advisor.records import StepConfig
from advisor.runtime.step import device_autocast

if TYPE_CHECKING:
    from advisor.bench.training import Training

ADAMW = TrainingSettings(optimizer="adamw")
"""How the family trains: the optimizer of nearly every transformer job."""
_LEARNING_RATE = 1e-4


def is_sequence_model(model: str) -> bool:
    """A zoo transformer built by transformers (its records name it by its zoo name)."""
    try:
        return zoo_model(model).reference is not None
    except ValueError:
        return False


def family_table(model: str, size: int) -> LayerTable:
    """The layer table of a family member at ``size`` (tokens, or ViT's image side), trained with AdamW."""
    from advisor.introspect.run import TaskInput, introspect

    zoo = zoo_model(model)
    assert zoo.reference is not None, f"{model} is not built by transformers"
    given = TaskInput(sequence_length=size) if zoo.tokens else TaskInput()
    table = introspect(zoo.reference, (3, size, size), zoo.kwargs(size), allow_factories=False, given=given)
    return table.trained(ADAMW)


def _samples(zoo: ZooModel, config: StepConfig, vocabulary: int) -> Iterator[Tensor]:
    """A fresh batch each step, drawn as a loader would hand it over (seeded: every run alike)."""
    generator = torch.Generator().manual_seed(0)
    size = config.input_size
    while True:
        if zoo.tokens:
            yield torch.randint(0, vocabulary, (config.batch, size), generator=generator)
        else:
            yield torch.rand((config.batch, 3, size, size), generator=generator)


def _vocabulary(step: torch.nn.Module) -> int:
    """The token ids a member reads: its configuration's vocabulary (a published size's too, whose zoo entry
    overrides no field: drawn from two ids, its embedding's backward would accumulate into two rows)."""
    config = getattr(getattr(step, "model", None), "config", None)
    return int(getattr(config, "vocab_size", 2) or 2)


def start_sequence_training(config: StepConfig, device: torch.device) -> Training:
    """A family member ready to take AdamW steps on ``device`` at ``config``'s batch and size."""
    from advisor.bench.training import Training
    from advisor.introspect.builders import trainable_named

    zoo = zoo_model(config.model)
    assert zoo.reference is not None, f"{config.model} is not built by transformers"
    step = trainable_named(zoo.reference, zoo.kwargs(config.input_size), device).train()
    vocabulary = _vocabulary(step)
    optimizer = torch.optim.AdamW(step.parameters(), lr=_LEARNING_RATE)
    plan = device_autocast("bf16", device)
    scaler = torch.amp.GradScaler(device.type, enabled=config.amp and plan.scaled)
    batches = _samples(zoo, config, vocabulary)

    def fetch() -> tuple[Tensor, Tensor]:
        inputs = next(batches).to(device, non_blocking=True)
        return inputs, inputs  # the labels come from the inputs, as the task's loss takes them

    def compute(inputs: Tensor, _labels: Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=plan.dtype, enabled=config.amp):
            loss = step(inputs)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return Training(step, optimizer, fetch, compute)
