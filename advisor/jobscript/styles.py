"""Which convention a training command is read in (`advisor.jobscript.commands`): by its program, then the
flags only one program defines; None where none is recognised (a program of the user's own)."""

from __future__ import annotations

from collections.abc import Mapping

from advisor.jobscript.finetuners import FINETUNERS, finetuner_style
from advisor.jobscript.image_jobs import CONVENTIONS, DEIT_PROGRAMS, foreign_flag
from advisor.jobscript.launchers import TRAINING_COMMANDS
from advisor.jobscript.llamafactory import LLAMAFACTORY, llamafactory_style
from advisor.jobscript.megatron import megatron_style
from advisor.jobscript.nanogpt import nanogpt_style
from advisor.jobscript.torchtitan import torchtitan_style

_PROGRAMS = (
    "imagenet",
    "torchvision",
    "timm",
    "deit",
    "hf",
    "lightning",
    "megatron",
    "nanogpt",
    "torchtitan",
)
STYLES = (*_PROGRAMS, *FINETUNERS, LLAMAFACTORY)
_TIMM_FLAGS = frozenset(
    {"grad-accum-steps", "data-dir", "img-size", "input-size", "model-ema", "sched", "opt"}
)
_TORCHVISION_FLAGS = frozenset(
    {"data-path", "train-crop-size", "val-resize-size", "lr-scheduler", "lr-warmup-epochs", "label-smoothing"}
)
"""torchvision's reference alone has these; ``--opt`` and ``--model-ema`` it shares with timm."""
_LIGHTNING_STEPS = frozenset({"fit", "validate", "test", "predict"})


def style_of(program: str, flags: Mapping[str, str], positional: list[str]) -> str | None:
    if program in TRAINING_COMMANDS or program.endswith(".sh"):  # not read, whatever flags it shares
        return None
    finetuner = finetuner_style(program, flags)
    if finetuner is not None:
        return finetuner
    if llamafactory_style(program, flags):
        return LLAMAFACTORY
    if "per-device-train-batch-size" in flags or "model-name-or-path" in flags:
        return "hf"
    if megatron_style(flags):
        return "megatron"
    if torchtitan_style(program, flags):
        return "torchtitan"
    if nanogpt_style(program, flags, positional):
        return "nanogpt"
    lightning_step = bool(positional) and positional[0] in _LIGHTNING_STEPS
    if lightning_step or any(key.startswith("trainer.") for key in flags):
        return "lightning"
    if "a" in flags or "arch" in flags:
        return "imagenet"
    if program in DEIT_PROGRAMS and "data-path" in flags and "model" in flags:
        return "deit"
    if "model" not in flags:
        return None
    timm = bool(_TIMM_FLAGS & flags.keys()) and not _TORCHVISION_FLAGS & flags.keys()
    first, other = ("timm", "torchvision") if timm else ("torchvision", "timm")
    # a flag the first does not define and the other does: the other's
    foreign = foreign_flag(CONVENTIONS[first], flags) and not foreign_flag(CONVENTIONS[other], flags)
    return other if foreign else first
