"""One rule for mixed precision, as the advice, the benchmarks and the training job apply it."""

from __future__ import annotations

import pytest
import torch

from advisor.bench.training import amp_plan
from advisor.precision import AMP_MODES, Precision, amp_mode, has_bf16, mixed_precision, step_precision
from advisor.runtime import autocast_plan

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
    amp: str, device: str, bf16: bool, expected: Precision
) -> None:
    assert step_precision(amp, device, bf16) is expected  # type: ignore[arg-type]
    plan = autocast_plan(amp, device, bf16)  # type: ignore[arg-type]
    assert plan.scaled == expected.scaled == (expected is Precision.FP16)
    assert (
        plan.dtype
        == {Precision.FP32: None, Precision.BF16: torch.bfloat16, Precision.FP16: torch.float16}[expected]
    )


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


def test_the_benchmark_times_mixed_precision_as_the_job_runs_it() -> None:
    assert amp_plan(torch.device("cpu")) == autocast_plan("bf16", "cpu")
