"""Which precision a training step computes in: one type and one rule, for the advice, the benchmarks and the
training job alike (the standard library only: the runtime and the wrapper import it)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

Amp = Literal["off", "bf16", "fp16"]
"""A precision as the environment contract (``ADVISOR_AMP``) spells it: off is fp32."""
AMP_MODES: tuple[Amp, ...] = ("off", "bf16", "fp16")


class Precision(StrEnum):
    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"

    @property
    def scaled(self) -> bool:
        """fp16 needs loss scaling (a GradScaler) against gradient underflow; bf16 has fp32's range."""
        return self is Precision.FP16


_FP16_ONLY = ("v100", "t4", "p100", "k80", "2080", "1080", "titan")


def has_bf16(gpu_type: str | None) -> bool:
    """By the GPU's name, for a partition the advice is for: GPUs before Ampere have no fast bfloat16."""
    name = (gpu_type or "").lower()
    return not any(old in name for old in _FP16_ONLY)


def mixed_precision(bf16: bool) -> Precision:
    """What mixed precision means on a device: bf16 where it has it, else fp16 with a loss scaler."""
    return Precision.BF16 if bf16 else Precision.FP16


def amp_mode(precision: Precision) -> Amp:
    """The contract's spelling of ``precision``."""
    if precision is Precision.BF16:
        return "bf16"
    return "fp16" if precision is Precision.FP16 else "off"


def step_precision(amp: Amp, device_type: str, bf16: bool) -> Precision:
    """The precision a step runs in when ``amp`` (off, bf16 or fp16) is asked for: a GPU without bf16 gets
    fp16, a CPU gets bf16 (the precision its autocast is made for)."""
    if amp == "off":
        return Precision.FP32
    if device_type != "cuda":
        return Precision.BF16
    return mixed_precision(bf16 and amp == "bf16")
