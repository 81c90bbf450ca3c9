"""`benchmarks/public_gpu.py` reads others' measurements the way the product's own records read."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.predict.features import layer_flops
from benchmarks.public_gpu import _deepbench, _interpolation_rows

HEADER = (
    "gpu,source,W,H,C,N,K,filter_w,filter_h,pad_w,pad_h,stride_w,stride_h,fwd_ms,bwd_input_ms,bwd_weight_ms,"
    "total_ms"
)


def test_a_deepbench_row_is_the_convolution_it_names(tmp_path: Path) -> None:
    path = tmp_path / "conv.csv"
    path.write_text(f"{HEADER}\nNV_V100,,700,161,1,4,32,20,5,0,0,2,2,0.2,0.3,0.25,0.75\n", encoding="utf-8")
    (sample,) = _deepbench(path)["NV_V100"]
    config = sample.config
    assert (config.width, config.height, config.in_channels, config.out_channels) == (700, 161, 1, 32)
    assert (config.kernel, config.stride, config.batch) == ((5, 20), (2, 2), 4)
    assert sample.seconds == pytest.approx(0.75e-3), "forward and both gradients, in seconds"
    # By hand: output 79 x 341 (no padding, stride 2), 32 filters of 1 x 5 x 20 MACs, batch 4, x2 FLOPs per
    # MAC, x3 for forward and the two gradients.
    assert layer_flops(config) == 3 * 2 * 4 * 32 * 79 * 341 * (5 * 20)


def test_the_measured_curve_rule_is_exact_on_a_power_law_and_linear_interpolation_on_a_line() -> None:
    batches = [8, 16, 32, 64, 128]
    power = {("p", "a", "g"): [(b, 0.01 * b**0.7) for b in batches]}
    line = {("l", "a", "g"): [(b, 0.05 + 0.001 * b) for b in batches]}
    on_power, on_line = _interpolation_rows(power), _interpolation_rows(line)
    assert [row.batch for row in on_power] == [16, 32, 64], "only interior batches are held out"
    assert all(row.product_s == pytest.approx(row.measured_s) for row in on_power)
    assert all(row.linear_s < row.measured_s / 1.01 for row in on_power), "a chord lies below a concave curve"
    assert all(row.linear_s == pytest.approx(row.measured_s) for row in on_line)
