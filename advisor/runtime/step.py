"""One optimizer step made of `grad_accum` micro-batches, under the advised mixed precision.

The step's parameter update equals that of one batch of `grad_accum` times the size: each micro-batch's
(mean) loss is divided by the number of micro-batches, gradients add up, and the optimizer (and the
gradient scaler) steps once. Under DistributedDataParallel, gradients are synchronised only on the last
micro-batch, so accumulation costs no extra communication.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from advisor.precision import Amp, Precision, step_precision
from advisor.runtime.data import to_device
from advisor.runtime.environment import RuntimeSettings

Batch = tuple[torch.Tensor, torch.Tensor]
LossOf = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""(inputs, targets) on the device -> the micro-batch's mean loss."""


@dataclass(frozen=True)
class AutocastPlan:
    """What autocast does on this device: the lower precision (None: off) and whether losses are scaled."""

    dtype: torch.dtype | None
    scaled: bool


_DTYPES = {Precision.BF16: torch.bfloat16, Precision.FP16: torch.float16}


def autocast_plan(amp: Amp, device_type: str, bf16_supported: bool = True) -> AutocastPlan:
    """Autocast's dtype (None: fp32, no autocast) and whether a GradScaler is needed, by `step_precision`."""
    precision = step_precision(amp, device_type, bf16_supported)
    return AutocastPlan(_DTYPES.get(precision), scaled=precision.scaled)


def device_autocast(amp: Amp, device: torch.device) -> AutocastPlan:
    """`autocast_plan` on ``device``, asking CUDA whether it has bf16."""
    bf16 = device.type != "cuda" or torch.cuda.is_bf16_supported()
    return autocast_plan(amp, device.type, bf16)


def world_size() -> int:
    """Processes in the default group: what the global batch is divided among."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return 1


def prepare_model(model: nn.Module, settings: RuntimeSettings, device: torch.device) -> nn.Module:
    """The model on `device`, channels_last when advised (wrap it in DDP after this)."""
    model = model.to(device)
    return model.to(memory_format=torch.channels_last) if settings.channels_last else model


class AccumulatingStep:
    """Runs optimizer steps from groups of micro-batches; see the module docstring."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        settings: RuntimeSettings,
        device: torch.device,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.settings = settings
        self.device = device
        self.plan = device_autocast(settings.amp, device)
        self.scaler = torch.amp.GradScaler(device.type) if self.plan.scaled else None

    def step(self, batches: Sequence[Batch], loss_of: LossOf) -> torch.Tensor:
        """One optimizer step over `batches` (normally `grad_accum` of them); returns the mean loss.

        The loss is returned as a detached tensor so that reading it (a device sync) is the caller's choice.
        """
        if not batches:
            raise ValueError("an optimizer step needs at least one micro-batch")
        total = torch.zeros((), device=self.device)
        for index, (inputs, targets) in enumerate(batches):
            last = index == len(batches) - 1
            with self._sync_unless(last):
                loss = self._forward(inputs, targets, loss_of) / len(batches)
                torch.autograd.backward(self.scaler.scale(loss) if self.scaler is not None else loss)
            total += loss.detach().float()
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total

    def _forward(self, inputs: torch.Tensor, targets: torch.Tensor, loss_of: LossOf) -> torch.Tensor:
        inputs = to_device(inputs, self.device, self.settings.channels_last)
        targets = to_device(targets, self.device)
        dtype = self.plan.dtype
        with torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not None):
            return loss_of(inputs, targets)

    def _sync_unless(self, last: bool) -> contextlib.AbstractContextManager[None]:
        if isinstance(self.model, DistributedDataParallel) and not last:
            return self.model.no_sync()
        return contextlib.nullcontext()
