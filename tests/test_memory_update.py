"""The optimizer's update as a step's peak: its temporaries counted from torch's code, by hand and against
a real AdamW step on this CPU, and the machine's update path read off measured peaks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from advisor.bench.measure import _TensorMemory
from advisor.introspect import Layer, LayerKind, LayerTable, Optimizer, Scaling, TensorShape
from advisor.introspect.memory import OptimizerUpdate, estimate_peak_memory
from advisor.introspect.table import Probe, TrainingSettings
from advisor.precision import Precision
from advisor.predict.peak_memory import fit_peak_memory

WIDE, HIGH, OUT = 256, 512, 4
ADAMW = TrainingSettings(optimizer="adamw")


def _linear(index: int, d_in: int, d_out: int) -> Layer:
    flops = 2 * d_in * d_out
    return Layer(
        index=index, name=f"{index}", op="Linear", kind=LayerKind.LINEAR,
        inputs=(TensorShape(dims=(1, d_in), batch_dim=0),),
        outputs=(TensorShape(dims=(1, d_out), batch_dim=0),),
        parameters=d_in * d_out, forward_flops=Scaling(per_sample=flops),
        backward_flops=Scaling(per_sample=2 * flops), bytes_read=Scaling(), bytes_written=Scaling(),
    )  # fmt: skip


def _table(saved_per_sample: int = 4 * (WIDE + HIGH)) -> LayerTable:
    """A 256 -> 512 -> 4 stack of bias-free linears, as introspection would record it."""
    layers = (_linear(0, WIDE, HIGH), _linear(1, HIGH, OUT))
    probe = Probe(layers, WIDE * HIGH + HIGH * OUT, Scaling(per_sample=saved_per_sample))
    return LayerTable.build("lab.nets:stack", {}, (1, 1, WIDE), probe).trained(ADAMW)


def test_the_update_s_temporaries_counted_by_hand() -> None:
    table, parameters, largest = _table(), WIDE * HIGH + HIGH * OUT, WIDE * HIGH
    per_tensor, foreach = (
        estimate_peak_memory(table, 1, Precision.FP32, Optimizer.SGD, 1, update)
        for update in (OptimizerUpdate.PER_TENSOR, OptimizerUpdate.FOREACH)
    )
    # AdamW one tensor at a time: sqrt(exp_avg_sq), then its quotient, both the size of the tensor updated.
    assert per_tensor.update_temporaries == 2 * 4 * largest
    # Multi-tensor: _foreach_sqrt of every second moment at once, divided in place.
    assert foreach.update_temporaries == 4 * parameters
    # Weights, gradients and two moments, then the temporaries; at batch 1 the update is the peak.
    assert per_tensor.update_peak == 4 * 4 * parameters + 2 * 4 * largest == per_tensor.total
    sgd = estimate_peak_memory(table.trained(None), 1, Precision.FP32, Optimizer.SGD)
    assert sgd.update_temporaries == 0 and sgd.total == sgd.forward_peak, "momentum SGD updates in place"
    assert per_tensor.forward_peak < foreach.update_peak < per_tensor.update_peak, "one tensor dominates"


def _measured_step() -> int:
    """The peak bytes of live tensors in one real AdamW step (the bench's count) of the stack at batch 1."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(WIDE, HIGH, bias=False), nn.Linear(HIGH, OUT, bias=False))
    optimizer = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(1, WIDE), torch.randint(0, OUT, (1,))
    for _ in range(2):  # the first step makes the state; the second is measured with it in place
        optimizer.zero_grad(set_to_none=True)
        state = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
        with _TensorMemory([*model.parameters(), *state, x, y]) as memory:
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    return memory.peak


def test_a_real_adamw_step_on_this_cpu_peaks_at_its_update_as_counted() -> None:
    measured = _measured_step()
    estimate = estimate_peak_memory(_table(), 1, Precision.FP32, Optimizer.SGD, 1, OptimizerUpdate.PER_TENSOR)
    # What the count leaves out: the input, the label and AdamW's scalar step counters (a few kB).
    assert measured == pytest.approx(estimate.total, rel=0.005)
    foreach = estimate_peak_memory(_table(), 1, Precision.FP32, Optimizer.SGD, 1, OptimizerUpdate.FOREACH)
    assert abs(foreach.total - measured) > 0.1 * measured, "a GPU's update would make another peak"


def test_the_update_a_machine_runs_is_read_off_its_peaks() -> None:
    tables = [_table(saved) for saved in (1_000, 40_000, 400_000, 4_000_000)]
    steps = [(table, batch, False) for table in tables for batch in (1, 4, 16)]
    cpu = [
        estimate_peak_memory(t, b, Precision.FP32, Optimizer.SGD, 1, OptimizerUpdate.PER_TENSOR).total
        for t, b, _ in steps
    ]
    fitted = fit_peak_memory(steps, [float(peak) for peak in cpu])
    assert fitted.update is OptimizerUpdate.PER_TENSOR
    assert [fitted.predict(t, b, amp) for t, b, amp in steps] == pytest.approx(cpu, rel=0.01)
