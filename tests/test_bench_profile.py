"""`advisor profile`'s parts of a real training step (`advisor.bench.profile`): the optimizer as its own
call's time, the kernels by their self time, per-op dispatch the rest."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable

import pytest
import torch
from torch import Tensor, nn

from advisor.bench import profile
from advisor.bench.training import Training
from advisor.records import StepConfig, StepPart


def test_a_step_is_split_into_its_optimizer_its_kernels_and_the_rest_as_dispatch() -> None:
    """Hand count: a 10 ms step whose optimizer took 2 ms and whose kernels 5 ms (layers) and 2 ms
    (memory-bound) left 1 ms of dispatch; kernels profiled longer than the step leave none."""
    kernels = {StepPart.LAYERS: 0.005, StepPart.MEMORY_BOUND: 0.002}
    assert profile.split_step(0.010, 0.002, kernels) == pytest.approx(
        {
            StepPart.LAYERS: 0.005,
            StepPart.MEMORY_BOUND: 0.002,
            StepPart.OPTIMIZER: 0.002,
            StepPart.DISPATCH: 0.001,
        }
    )
    assert profile.split_step(0.008, 0.002, kernels)[StepPart.DISPATCH] == 0.0


def test_a_profiled_run_that_waited_for_the_cpu_has_its_wait_taken_out_of_its_kernels() -> None:
    """Hand count: a run that waited a fifth of its wall time holds a fifth of wait in each kernel part."""
    kernels = {StepPart.LAYERS: 0.010, StepPart.MEMORY_BOUND: 0.005}
    assert profile.unwaited(kernels, 0.2) == pytest.approx(
        {StepPart.LAYERS: 0.008, StepPart.MEMORY_BOUND: 0.004}
    )
    assert profile.unwaited(kernels, 0.0) == kernels


def test_each_part_is_its_least_over_the_profiled_runs() -> None:
    """Hand count: the profiler's cost landed in the layers in the first run, in the memory-bound ops in
    the second: each part keeps its least."""
    runs = [
        {StepPart.LAYERS: 0.012, StepPart.MEMORY_BOUND: 0.002},
        {StepPart.LAYERS: 0.009, StepPart.MEMORY_BOUND: 0.003},
    ]
    assert profile.least(runs) == {StepPart.LAYERS: 0.009, StepPart.MEMORY_BOUND: 0.002}


def test_a_slow_spell_of_the_cpu_does_not_land_in_dispatch() -> None:
    """Hand count: a step of 10 ms of kernels, 2 ms of optimizer and 3 ms of dispatch, taken twice, once
    in a spell where the host ran everything 1.3x slower. Each part at its least keeps 3 ms of dispatch; the
    slow round's step beside the fast round's kernels would read 7.5 ms (on this VM resnet18 at batch 32
    read 12.0 ms so, 3.0 ms at the least of both: benchmarks/README.md)."""
    rounds = [
        profile.ProfiledRound(0.0195, 0.0026, {StepPart.LAYERS: 0.0104, StepPart.MEMORY_BOUND: 0.0026}),
        profile.ProfiledRound(0.015, 0.002, {StepPart.LAYERS: 0.008, StepPart.MEMORY_BOUND: 0.002}),
    ]
    assert profile.split_rounds(rounds) == pytest.approx(
        {
            StepPart.LAYERS: 0.008,
            StepPart.MEMORY_BOUND: 0.002,
            StepPart.OPTIMIZER: 0.002,
            StepPart.DISPATCH: 0.003,
        }
    )


class _PythonHeavySGD(torch.optim.SGD):
    """SGD whose step spends 20 ms in Python besides its kernels, as a real one's loop over many tensors
    does: time no aten op's self time holds."""

    def step(self, closure: object = None) -> None:  # type: ignore[override]
        time.sleep(0.02)
        super().step()


def _training(batches: Iterable[int]) -> Training:
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = _PythonHeavySGD(model.parameters(), lr=0.01, momentum=0.9)
    data = [(torch.randn(8, 64), torch.randint(0, 10, (8,))) for _ in batches]
    loaded = iter(data)

    def fetch() -> tuple[Tensor, Tensor]:
        return next(loaded)

    def compute(images: Tensor, labels: Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(nn.functional.cross_entropy(model(images), labels))
        optimizer.step()

    return Training(model, optimizer, fetch, compute)


def test_the_optimizer_is_its_whole_call_not_only_its_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The swept update prices the optimizer's whole call, its Python loop included: the profile's
    optimizer part holds the 20 ms no kernel accounts for, and dispatch does not."""
    monkeypatch.setattr(profile, "start_training", lambda _c, _d, batches, **_: _training(range(batches)))
    config = StepConfig.model_validate(
        {"model": "resnet18", "input_size": 32, "batch": 8, "amp": False, "channels_last": False,
         "pinned": False, "workers": 0}
    )  # fmt: skip
    parts = profile.profile_step(config, torch.device("cpu"), steps=3)
    assert parts[StepPart.OPTIMIZER] >= 0.02
    assert parts[StepPart.DISPATCH] < 0.02
    assert parts[StepPart.LAYERS] > 0 and parts[StepPart.MEMORY_BOUND] > 0


def test_profiling_a_step_writes_nothing_of_the_profilers_own_to_stderr() -> None:
    """A fresh process, as `advisor profile` is: libkineto's start/stop lines (and its error on a machine
    without a GPU) would land amid the command's table."""
    script = (
        "import torch\n"
        "from advisor.bench import profile\n"
        "from advisor.bench.training import Training\n"
        "model = torch.nn.Linear(8, 2)\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "def compute(x):\n"
        "    optimizer.zero_grad()\n"
        "    model(x).sum().backward()\n"
        "    optimizer.step()\n"
        "training = Training(model, optimizer, lambda: (torch.randn(4, 8),), compute)\n"
        "print(sorted(p.value for p in profile._profiled_run(training, 2)))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"},
    )  # fmt: skip
    assert "convolutions and linears" in ran.stdout
    assert "profiler_start" not in ran.stderr and "USDT" not in ran.stderr, ran.stderr


def test_what_a_convolution_runs_inside_itself_is_the_convolutions() -> None:
    """A stride-1 1x1 convolution at batch 2 runs PyTorch's ``_slow_conv2d`` path, whose backward fills its
    buffers (``aten::fill_``, a memory-bound op by name): inside the convolution, it is the layer's, and
    so are its views and allocations, as the micro-benchmark that prices the layer times them; the ReLU
    after it stays memory-bound."""
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Conv2d(16, 16, 1), nn.ReLU())
    images = torch.randn(2, 16, 8, 8, requires_grad=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiled:
        model(images).sum().backward()
    events = profiled.events()
    inner = [e for e in events if e.name == "aten::fill_" and profile._within(e, profile._layer)]
    assert inner, "the slow path's fills run inside the convolution"
    rest = [e for e in events if profile.op_part(e.name) in (StepPart.MEMORY_BOUND, StepPart.DISPATCH)]
    inside = sum(e.self_cpu_time_total for e in rest if profile._within(e, profile._layer)) / 1e6
    layers = sum(e.self_cpu_time_total for e in events if profile.op_part(e.name) is StepPart.LAYERS) / 1e6
    parts = profile.kernel_parts(events, steps=1)
    assert parts[StepPart.LAYERS] == pytest.approx(layers + inside)
    assert parts[StepPart.MEMORY_BOUND] > 0, "the ReLU"


def test_an_op_that_moves_no_byte_is_dispatch_not_memory_bound() -> None:
    """A real profile of a convolution, a ReLU, a flatten and a linear: the flatten's view and the linear's
    transpose of its weight (``aten::t``) move no byte, so their self time is in neither kernel part and
    `split_step` leaves it to dispatch; the ReLU stays memory-bound."""
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 10))
    images = torch.randn(2, 3, 8, 8)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiled:
        model(images).sum().backward()
    events = profiled.events()
    outside = [e for e in events if not profile._within(e, profile._layer)]
    metadata = {e.name for e in outside if e.name in profile.METADATA}
    assert {"aten::view", "aten::t"} <= metadata
    assert all(profile.op_part(name) is StepPart.DISPATCH for name in metadata)
    bound = [e for e in outside if profile.op_part(e.name) is StepPart.MEMORY_BOUND]
    assert "aten::relu" in {e.name for e in bound}
    parts = profile.kernel_parts(events, steps=1)
    assert parts[StepPart.MEMORY_BOUND] == pytest.approx(sum(e.self_cpu_time_total for e in bound) / 1e6)
    everything = sum(e.self_cpu_time_total for e in events if e.name.startswith("aten::")) / 1e6
    moved_nothing = sum(e.self_cpu_time_total for e in outside if e.name in metadata) / 1e6
    assert moved_nothing > 0
    assert sum(parts.values()) == pytest.approx(everything - moved_nothing)
