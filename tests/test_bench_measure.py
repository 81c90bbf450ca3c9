"""Real torch on the CPU, at sizes small enough for seconds: squeezenet1_1 at 32x32, batch 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from advisor.bench.measure import measure_layer, measure_step
from advisor.bench.tables import zoo_table
from advisor.bench.training import pace_training, run_delay_s
from advisor.records import LayerConfig

from .bench_support import CPU, TINY, one_thread  # noqa: F401 (an autouse fixture)


@pytest.mark.parametrize(
    "settings",
    [{}, {"amp": True}, {"channels_last": True}, {"pinned": True, "workers": 1}],
    ids=["default", "amp-bf16", "channels-last", "pinned-with-a-worker"],
)
def test_a_training_step_is_timed_with_its_memory(settings: dict[str, object]) -> None:
    config = TINY.model_copy(update=settings)
    # The group is sized by the last warm-up step: the first one also pays for autocast's and the
    # allocator's first use, which on a loaded machine alone can pass GROUP_S.
    result = measure_step(config, CPU, steps=3, warmup=2)
    assert result.fits and result.error is None
    assert result.median_s is not None and result.median_s > 0
    assert result.non_device_share is not None and 0 <= result.non_device_share <= 1
    # At least the weights, their gradients and the momentum (squeezenet1_1: ~0.7 M parameters).
    assert result.peak_memory_bytes is not None and result.peak_memory_bytes > 3 * 4 * 700_000
    assert result.arch_hash == zoo_table("squeezenet1_1", 32).architecture_hash
    # A worker would prefetch while the pace step runs, hiding the loading time the step should show.
    if config.workers:
        assert result.pace_ratio is None and result.pace_s is None
        assert result.steps == 3
    else:
        assert result.pace_ratio is not None and result.pace_s is not None
        # A step this short (~10 ms) is timed in groups of many steps (three, unless some were disturbed).
        assert result.steps > 3
        # Timed side by side, the paced time and the raw one agree up to a shared machine's noise.
        assert 0.5 < result.pace_ratio * result.pace_s / result.median_s < 2.0


def test_the_pace_ratio_is_the_step_over_the_pace_step_around_it() -> None:
    small = measure_step(TINY, CPU, steps=3, warmup=1)
    large = measure_step(TINY.model_copy(update={"model": "resnet50", "batch": 4}), CPU, steps=3, warmup=1)
    assert small.pace_ratio is not None and large.pace_ratio is not None
    # resnet50 at batch 4 is tens of times squeezenet1_1 at batch 2 (~0.13 vs 0.005 s here).
    assert large.pace_ratio > 5 * small.pace_ratio


@contextmanager
def rival_on_our_cpu() -> Iterator[None]:
    """This process on one CPU, and beside it on that CPU a process that never stops computing."""
    if not Path("/proc/thread-self/schedstat").exists():
        pytest.skip("the kernel keeps no schedstat")
    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mask)})
    rival = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # inherits the one CPU
    try:
        time.sleep(0.2)
        yield
    finally:
        rival.kill()
        rival.wait()
        os.sched_setaffinity(0, mask)


def test_the_time_a_thread_waits_for_a_cpu_another_process_holds_is_counted() -> None:
    with rival_on_our_cpu():
        waited, began, computed = run_delay_s(), time.perf_counter(), time.thread_time()
        while time.thread_time() - computed < 0.3:
            pass
        wall, waited = time.perf_counter() - began, run_delay_s() - waited
        computed = time.thread_time() - computed
    # Two processes on one CPU: each holds it about half the time (or less, where others share it too).
    assert waited > 0.25 * wall
    assert wall - waited == pytest.approx(computed, rel=0.1)


def test_a_step_beside_a_rival_on_its_cpu_is_timed_as_on_its_own() -> None:
    """The rival takes about half the wall time; the step's time leaves it out."""
    config = TINY.model_copy(update={"model": "resnet18", "batch": 4})
    alone = measure_step(config, CPU, steps=3, warmup=1)
    with rival_on_our_cpu():
        shared = measure_step(config, CPU, steps=3, warmup=1)
    assert alone.median_s is not None and shared.median_s is not None
    assert shared.median_s < 1.4 * alone.median_s
    assert shared.pace_ratio == pytest.approx(alone.pace_ratio, rel=0.3)


def test_a_memory_limit_makes_a_configuration_not_fit() -> None:
    result = measure_step(TINY, CPU, steps=1, warmup=0, memory_limit_bytes=1)
    assert not result.fits and result.median_s is None
    assert result.error is not None and "exceeds the limit" in result.error


def _conv(**fields: object) -> LayerConfig:
    base = LayerConfig(
        op="conv2d",
        in_channels=16,
        out_channels=16,
        kernel=(3, 3),
        stride=(1, 1),
        padding=(1, 1),
        dilation=(1, 1),
        groups=1,
        height=8,
        width=8,
        batch=2,
        amp=False,
        cudnn_benchmark=True,
    )
    return base.model_copy(update=fields)


@pytest.mark.parametrize(
    "config",
    [
        _conv(groups=16),
        _conv(groups=4, amp=True),
        _conv(op="conv_transpose2d", stride=(2, 2)),
        _conv(op="linear", kernel=(1, 1), padding=(0, 0), height=5, width=1),
    ],
    ids=["depthwise", "grouped-amp", "transposed", "linear"],
)
def test_a_layer_is_timed(config: LayerConfig) -> None:
    result = measure_layer(config, CPU, repeats=3, warmup=1)
    assert result.fits and result.median_s is not None and result.median_s > 0
    assert result.pace_s is not None and result.pace_ratio is not None
    assert result.pace_ratio * result.pace_s == pytest.approx(result.median_s)
    assert config.depthwise == (config.groups == 16)


def test_a_layer_is_warmed_after_the_pace_step_not_timed_right_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a CPU the pace step (a real one) runs before the warm-up and after the timed repeats, never
    between the warm-up and the first repeat: the runs right after it are timed cold (the first about ten
    times slow, benchmarks/README.md)."""
    from advisor.bench import measure
    from advisor.bench.training import pace_step
    from advisor.ops.workloads import Workload, build

    happened: list[str] = []
    real_pace = pace_step()

    def pace() -> float:
        happened.append("pace")
        return real_pace()

    def logged(config: LayerConfig, device: object) -> Workload:
        workload = build(config, CPU)

        def run() -> None:
            happened.append("run")
            workload.run()

        return Workload(workload.reset, run)

    monkeypatch.setattr(measure, "pace_step", lambda: pace)
    monkeypatch.setattr(measure, "build", logged)
    measure_layer(_conv(groups=16), CPU, repeats=3, warmup=2)
    assert happened[0] == "pace" and happened[-1] == "pace"
    assert set(happened[1:-1]) == {"run"} and len(happened[1:-1]) >= 2 + 3


def test_a_real_allocation_failure_is_recorded_not_raised() -> None:
    """The child caps its address space a little above what it already maps, then asks for far more."""
    script = textwrap.dedent(
        """
        import resource, torch
        from advisor.bench.measure import measure_step
        from advisor.records import StepConfig
        torch.ones(1000) + 1  # start torch's threads before the cap
        mapped = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize:"))
        cap = (mapped + 300 * 1024) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        config = StepConfig(model="resnet18", input_size=224, batch=256, amp=False,
                            channels_last=False, pinned=False, workers=0)
        print(measure_step(config, torch.device("cpu"), steps=1, warmup=0).model_dump_json())
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    result = json.loads(completed.stdout.splitlines()[-1])
    assert result["fits"] is False and result["median_s"] is None
    assert "allocate" in result["error"].lower() or "memory" in result["error"].lower()


def test_the_pace_steps_network_does_not_learn_so_each_call_does_the_same_work() -> None:
    """Trained on its one batch call after call, the pace step's network learned it and its backward ran
    into subnormal numbers: 1.8 times slower after a thousand calls. Its weights must stay as built."""
    training = pace_training()
    before = [parameter.detach().clone() for parameter in training.model.parameters()]
    batch = training.fetch()
    for _ in range(3):
        training.compute(*batch)
    after = list(training.model.parameters())
    assert all(torch.equal(b, a) for b, a in zip(before, after, strict=True))
    assert any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in after), "it did train a step"
