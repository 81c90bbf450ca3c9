"""One rule for mixed precision, as the advice, the benchmarks and the training job apply it."""

from __future__ import annotations

import pytest
import torch

from advisor.precision import AMP_MODES, Amp, Precision, amp_mode, has_bf16, mixed_precision, step_precision
from advisor.runtime import autocast_plan
from advisor.runtime.step import device_autocast

DTYPES = {Precision.FP32: None, Precision.BF16: torch.bfloat16, Precision.FP16: torch.float16}


@pytest.mark.parametrize(
    ("amp", "device", "bf16", "expected"),
    [
        ("off", "cuda", True, Precision.FP32),
        ("off", "cpu", True, Precision.FP32),
        ("bf16", "cuda", True, Precision.BF16),
        ("bf16", "cuda", False, Precision.FP16),  # a V100 asked for bf16 gets fp16 and a scaler
        ("fp16", "cuda", True, Precision.FP16),
        ("fp16", "cpu", False, Precision.BF16),  # a CPU's autocast is bf16
    ],
)
def test_a_step_runs_in_the_precision_its_device_has(
    amp: Amp, device: str, bf16: bool, expected: Precision
) -> None:
    assert step_precision(amp, device, bf16) is expected
    plan = autocast_plan(amp, device, bf16)
    assert plan.scaled == expected.scaled == (expected is Precision.FP16)
    assert plan.dtype == DTYPES[expected]


def test_the_advice_names_the_precision_of_the_target_gpu() -> None:
    assert [has_bf16(name) for name in ("a100", "NVIDIA H100 80GB", "v100", "Tesla T4", None)] == [
        True,
        True,
        False,
        False,
        True,
    ]
    assert amp_mode(mixed_precision(has_bf16("v100"))) == "fp16"
    assert amp_mode(mixed_precision(has_bf16("a100"))) == "bf16"
    assert [amp_mode(step_precision(mode, "cuda", True)) for mode in AMP_MODES] == list(AMP_MODES)


def test_on_a_cpu_the_device_asks_nothing_of_cuda_and_gets_bf16() -> None:
    assert device_autocast("bf16", torch.device("cpu")) == autocast_plan("bf16", "cpu")
    assert device_autocast("fp16", torch.device("cpu")).dtype == torch.bfloat16
