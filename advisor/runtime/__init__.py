"""What a training script imports to follow the advisor's advice (no daemon, no predictor: torch only).

settings = read_settings(os.environ, RuntimeSettings(micro_batch=args.batch_size))
model = prepare_model(model, settings, device)
stepper = AccumulatingStep(model, optimizer, settings, device)
loader = DataLoader(dataset, batch_size=settings.micro_batch, **loader_options(device, workers))
for group in micro_batches(loader, settings.grad_accum):
    loss = stepper.step(group, lambda x, y: loss_fn(model(x), y))
"""

from __future__ import annotations

from advisor.precision import Amp
from advisor.runtime.data import LoaderOptions, loader_options, micro_batches, to_device
from advisor.runtime.environment import ContractError, RuntimeSettings, read_settings
from advisor.runtime.step import AccumulatingStep, AutocastPlan, autocast_plan, prepare_model, world_size

__all__ = [
    "AccumulatingStep",
    "Amp",
    "AutocastPlan",
    "ContractError",
    "LoaderOptions",
    "RuntimeSettings",
    "autocast_plan",
    "loader_options",
    "micro_batches",
    "prepare_model",
    "read_settings",
    "to_device",
    "world_size",
]
