"""What only a GPU can show: CUDA timing, cuDNN's benchmark mode, AMP on the device, peak device memory.

Skipped without CUDA; ``pytest -m cuda`` runs them on a GPU machine (``benchmarks/gpu/check.sh`` does).
"""

from __future__ import annotations

import pytest
import torch

from advisor.bench.measure import measure_layer, measure_step
from advisor.records import LayerConfig

from .bench_support import TINY

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
CUDA = torch.device("cuda")


@pytest.mark.parametrize(
    "settings",
    [{}, {"amp": True}, {"channels_last": True}, {"pinned": True, "workers": 1}],
    ids=["fp32", "amp", "channels-last", "pinned-with-a-worker"],
)
def test_a_training_step_on_the_gpu_is_timed_with_its_device_memory(settings: dict[str, object]) -> None:
    config = TINY.model_copy(update={"model": "resnet18", "batch": 32, **settings})
    result = measure_step(config, CUDA, steps=5, warmup=2)
    assert result.fits and result.error is None, result.error
    assert result.median_s is not None and 0 < result.median_s < 1
    # resnet18 at 32x32, 10 classes: 11.2 M parameters; weights, gradients and momentum at least.
    assert result.peak_memory_bytes is not None and result.peak_memory_bytes > 3 * 4 * 11_000_000


def test_a_batch_too_large_for_the_memory_limit_does_not_fit_on_the_gpu() -> None:
    result = measure_step(TINY, CUDA, steps=1, warmup=0, memory_limit_bytes=1)
    assert not result.fits and result.median_s is None


@pytest.mark.parametrize("benchmark", [True, False], ids=["cudnn-benchmark", "cudnn-default"])
@pytest.mark.parametrize("groups", [1, 4, 64], ids=["dense", "grouped", "depthwise"])
def test_a_convolution_is_timed_on_the_gpu(benchmark: bool, groups: int) -> None:
    config = LayerConfig(
        op="conv2d",
        in_channels=64,
        out_channels=64,
        kernel=(3, 3),
        stride=(1, 1),
        padding=(1, 1),
        dilation=(1, 1),
        groups=groups,
        height=56,
        width=56,
        batch=32,
        amp=False,
        cudnn_benchmark=benchmark,
    )
    result = measure_layer(config, CUDA, repeats=5, warmup=2)
    assert result.fits and result.error is None, result.error
    assert result.median_s is not None and 0 < result.median_s < 0.5
