"""What the nightly grid measures beyond compute (`advisor.bench.sweeps`) and the rates fitted from it
(`advisor.ops.rates`): planned on both device kinds, measured with real torch, fitted back."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from math import log

import pytest
import torch

from advisor.bench.measure import measure_layer
from advisor.bench.plan import (
    DeviceProfile,
    Phase,
    Plan,
    build_plan,
    full_plan,
    nightly_grid,
)
from advisor.bench.plan_rows import describe
from advisor.bench.reporting import describe_item
from advisor.bench.short_plans import check_plan, quick_plan
from advisor.bench.sweeps import CPU_SWEEPS, UPDATES, Sweeps, powers, scattered, swept
from advisor.ops import Op, known, op_of
from advisor.ops import configs as op_configs
from advisor.ops import costs as op_costs
from advisor.ops.known import RELEASE
from advisor.ops.rates import MachineRates, fit_rates
from advisor.records import LayerConfig, ResultLine
from tests.plan_support import fake_table

SWEPT = (Phase.BANDWIDTH, Phase.LAUNCHES, Phase.UPDATES)
MEMORY_BOUND = {
    "activation", "elementwise", "batch_norm", "batch_norm_small_maps", "layer_norm", "rms_norm", "softmax",
    "pooling", "dropout", "embedding",
}  # fmt: skip


def _swept_ops(plan: Plan, phase: Phase) -> list[LayerConfig]:
    return [i.config for i in plan.items if i.phase is phase and isinstance(i.config, LayerConfig)]


@pytest.fixture(scope="module", params=["cpu", "cuda"])
def nightly(request: pytest.FixtureRequest) -> Plan:
    return full_plan(DeviceProfile.assumed(request.param), fake_table)


def test_the_nightly_grid_sweeps_memory_bound_ops_launches_and_updates_after_the_coarse_grid(
    nightly: Plan,
) -> None:
    phases = [item.phase for item in nightly.items]
    first, last = phases.index(Phase.BANDWIDTH), phases.index(Phase.LAYERS)
    assert set(phases[:first]) == {Phase.COARSE} and set(phases[first:last]) == set(SWEPT)
    swept_configs = [item.config for item in nightly.items if item.phase in SWEPT]
    assert all(isinstance(config, LayerConfig) for config in swept_configs)
    assert {config.op for config in _swept_ops(nightly, Phase.BANDWIDTH)} == MEMORY_BOUND
    assert {config.op for config in _swept_ops(nightly, Phase.UPDATES)} == {*UPDATES, RELEASE}
    chains = {"launch_chain", "module_chain", *known.TINY_LAYERS.values()}
    assert {config.op for config in _swept_ops(nightly, Phase.LAUNCHES)} == chains
    rows = {row.phase: row for row in describe(nightly)}
    assert rows[Phase.BANDWIDTH].kind == "sweep"
    assert rows[Phase.BANDWIDTH].sizes[0] == 4**5 and rows[Phase.BANDWIDTH].sizes[-1] >= 4**12
    assert rows[Phase.LAUNCHES].sizes == (16, 64, 256)
    assert sum(row.share for row in describe(nightly)) == pytest.approx(1.0)
    share = sum(rows[phase].share for phase in SWEPT)
    assert 0 < share < 0.15, "a small part of a night (these stand-in tables' night is short: the zoo's 2%)"


def test_each_swept_configuration_is_its_own_op_and_costs_what_it_moves() -> None:
    for phase, config in swept(CPU_SWEEPS):
        op = op_of(config)
        cost = op.cost(config)
        assert cost.forward_bytes > 0, (phase, config)
        if phase == "bandwidth":
            assert op.sweep is not None and op.family == "vector"
            elements = config.in_channels * config.height * config.width
            assert op.sweep(elements) == config and config.batch == 1
            assert elements in CPU_SWEEPS.elements or op.name == "pooling"
    adam = op_configs.update("adam", 4**8, 64)
    assert (adam.height, adam.width) == (1024, 64)
    plan = full_plan(DeviceProfile.assumed("cpu"), fake_table)
    described = {describe_item(i) for i in plan.items if i.config == adam}
    assert described == {"adam 65,536 parameters in 64 tensors"}
    release = op_configs.update(RELEASE, 4**8, 1)
    assert describe_item(next(i for i in plan.items if i.config == release)) == (
        "grad_release 65,536 parameters in 1 tensor"
    )


def test_a_check_plan_sweeps_thinly_and_the_quick_plan_not_at_all() -> None:
    check = check_plan(DeviceProfile.assumed("cuda"), fake_table)
    night = full_plan(DeviceProfile.assumed("cuda"), fake_table)
    for phase in SWEPT:
        thin = [i.config for i in check.items if i.phase is phase]
        full = [i.config for i in night.items if i.phase is phase]
        assert 0 < len(thin) < len(full) and set(thin) <= set(full)
    sizes = {row.phase: row.sizes for row in describe(check)}
    assert sizes[Phase.BANDWIDTH][-1] == 4**14, "the largest size is kept"
    assert not any(item.phase in SWEPT for item in quick_plan(fake_table).items)


def test_an_op_with_a_sweep_is_swept_by_its_entry_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    gelu = Op(
        "gelu",
        "vector",
        frozenset(),
        partial(op_costs.vector, op_costs.ACTIVATION),
        "advisor.ops.workloads:activation",
        sweep=partial(op_configs.swept_flat, "gelu"),
    )
    monkeypatch.setattr(known, "OPS", (*known.OPS, gelu))
    plan = full_plan(DeviceProfile.assumed("cpu"), fake_table)
    gelus = [config for config in _swept_ops(plan, Phase.BANDWIDTH) if config.op == "gelu"]
    assert [c.height for c in gelus] == list(CPU_SWEEPS.elements)


def _moved(config: LayerConfig) -> float:
    cost = op_of(config).cost(config)
    return cost.forward_bytes + cost.backward_bytes


def test_the_rates_fitted_are_the_rates_measured() -> None:
    """A machine moving 10 GB/s past 1 MiB, 20 us an op below it, 5 us a launch, 1.5 us a module call, Adam
    at 2 ns a parameter and 3 us a tensor: each comes back, between and beyond the sizes measured."""

    def seconds(config: LayerConfig) -> float:
        if config.op == "launch_chain":
            return 1e-4 + 2 * config.height * 5e-6
        if config.op == "module_chain":
            return 1.2e-4 + config.height * (2 * 5e-6 + 1.5e-6)
        if config.op == "tiny_batch_norm":
            return 1.5e-4 + config.height * 30e-6
        if config.op.startswith("tiny_"):
            return 1.5e-4 + config.height * 20e-6
        if config.op in UPDATES:
            return 5e-5 + 3e-6 * config.width + 2e-9 * config.height * config.width
        return max(_moved(config) / 1e10, 2e-5)

    measured = [(config, seconds(config)) for _, config in swept(CPU_SWEEPS)]
    conv = op_configs.launch_chain(8, 16).model_copy(update={"op": "conv2d", "in_channels": 3})
    rates = fit_rates([*measured, (conv, 1.0)])
    assert set(rates.curves) == MEMORY_BOUND
    assert rates.launch_s == pytest.approx(5e-6)
    assert rates.module_s == pytest.approx(1.5e-6)
    assert rates.layer_s["tiny_batch_norm"] == pytest.approx(30e-6)
    assert rates.outside_s("batch_norm") == pytest.approx(30e-6 - 1.5e-6), "its module call priced apart"
    assert rates.outside_s("depthwise_conv2d") == pytest.approx(20e-6 - 1.5e-6), "as a dense one"
    assert rates.outside_s("softmax") is None, "no tiny softmax measured"
    # The largest update in the most tensors (16 Mi parameters in 256), its fixed and per-tensor costs in it.
    assert rates.per_parameter_s("adam") == pytest.approx(2e-9 + (5e-5 + 3e-6 * 256) / 4**12)
    assert rates.update_s("adam", 10**6, 100) == pytest.approx(5e-5 + 3e-4 + 2e-3, rel=0.01)
    assert rates.update_s("adam", 10**5, 1) == pytest.approx(5e-5 + 3e-6 + 2e-4, rel=0.05)
    one, eight, many = (rates.update_s("adam", 10**5, tensors) or 0 for tensors in (1, 8, 64))
    assert one < eight < many
    # Between 64 and 256 tensors (mobilenet_v2's 158), a tensor's cost as the two splits measured it.
    assert rates.update_s("adam", 4**9, 158) == pytest.approx(5e-5 + 3e-6 * 158 + 2e-9 * 4**9)
    assert rates.update_s("lion", 10**6) is None
    assert rates.bytes_per_s(2**30) == pytest.approx(1e10)
    assert rates.bytes_per_s(2**30, "softmax") == pytest.approx(1e10)
    assert rates.bytes_seconds(100, "activation") == pytest.approx(2e-5), "a tiny op costs its launch"
    lookup = op_configs.swept_table("embedding", 4**5)
    assert rates.bytes_seconds(100, "embedding") == pytest.approx(seconds(lookup)), "its 256 rows looked up"
    assert rates.bytes_seconds(3e6, "activation") == pytest.approx(3e-4, rel=0.05)
    assert MachineRates().bytes_seconds(1e6) is None and MachineRates().launch_s is None
    assert MachineRates().module_s is None
    chains = [(c, seconds(c)) for _, c in swept(CPU_SWEEPS) if c.op == "launch_chain"]
    assert fit_rates(chains).module_s is None, "no module chain measured: no module call priced"


def test_more_tensors_cost_no_less_past_the_splits_measured_where_they_were_faster() -> None:
    """An Adam step of 16 Mi parameters in one tensor slower than in 64 (its temporaries out of cache)."""
    count = 4**12
    one, many = op_configs.update("adam", count, 1), op_configs.update("adam", count, 64)
    rates = fit_rates([(one, 0.18), (many, 0.05)])
    assert rates.update_s("adam", count, 1) == pytest.approx(0.18)
    assert rates.update_s("adam", count, 200) == pytest.approx(0.05)
    assert rates.update_s("adam", 2 * count, 64) == pytest.approx(0.1), "past the largest: per parameter"
    assert rates.per_parameter_s("adam") == pytest.approx(0.05 / count)


def test_a_bandwidth_curve_interpolates_in_log_size() -> None:
    small, large = op_configs.swept_flat("activation", 4**5), op_configs.swept_flat("activation", 4**6)
    rates = fit_rates([(small, 1e-5), (large, 1e-4)])
    middle = (_moved(small) * _moved(large)) ** 0.5
    assert log(rates.bytes_seconds(middle) or 0) == pytest.approx((log(1e-5) + log(1e-4)) / 2)


@pytest.mark.parametrize(
    "config",
    [
        op_configs.launch_chain(16, 16),
        op_configs.module_chain(16, 16),
        *(op_configs.tiny_chain(name, 16) for name in sorted(set(known.TINY_LAYERS.values()))),
        op_configs.update("adamw", 4096, 4),
        op_configs.update("sgd_momentum", 4096, 1),
        op_configs.swept_pooling("pooling", 4**5),
        op_configs.swept_rows("softmax", 4**5),
        op_configs.swept_table("embedding", 4**5),
        op_configs.swept_flat("dropout", 4**5),
        op_configs.swept_channels("batch_norm", 4**5),
        op_configs.swept_small_maps("batch_norm_small_maps", 4**5),
    ],
    ids=lambda config: config.op,
)
def test_a_swept_configuration_is_measured_on_this_cpu(config: LayerConfig) -> None:
    measured = measure_layer(config, torch.device("cpu"), repeats=2, warmup=1)
    assert measured.fits and measured.median_s is not None and measured.median_s > 0


def test_sweep_sizes_are_powers_from_the_smallest() -> None:
    assert powers(1, 3) == (4, 16, 64)
    assert powers(3, 2) == ()
    assert replace(CPU_SWEEPS, chains=(16, 64, 256, 1024)).thin().chains == (16, 256, 1024)


def test_a_run_of_the_sweeps_lands_in_the_store_and_comes_back_as_the_machines_rates() -> None:
    """The product's path: a plan's sweep phases measured by `run_plan`, stored, read back as training
    reads layers (`layer_samples`), fitted."""
    from advisor.bench.run import RunOn, run_plan
    from advisor.predict.registry import layer_samples
    from advisor.store import Store

    # Chains 16 and 256 links long: between 16 and 64, a loaded CI runner once put a slope outside (0, 10 ms).
    tiny = Sweeps(elements=(4**5,), chains=(16, 256), parameters=(4**7,), tensors=(1, 4), ops=("activation",))
    grid = replace(nightly_grid("cpu"), models=(), layer_models=(), sweeps=tiny, repeats=2)
    plan = build_plan(grid, DeviceProfile.assumed("cpu"), fake_table)
    phases = [item.phase for item in plan.items]
    tiny_chains = 2 * len(set(known.TINY_LAYERS.values()))
    assert phases == [Phase.BANDWIDTH, *(4 + tiny_chains) * [Phase.LAUNCHES], *7 * [Phase.UPDATES]]
    lines: list[ResultLine] = []
    summary = run_plan(plan, RunOn(torch.device("cpu"), "cpu"), budget_s=120, sink=lines.append)
    assert summary.measured == len(plan.items)
    store = Store.memory()
    store.ingest(lines)
    rates = fit_rates((s.config, s.seconds) for s in layer_samples(store.layer_rows()))
    assert set(rates.curves) == {"activation"} and set(rates.updates) == {*UPDATES, RELEASE}
    assert (rates.update_s(RELEASE, 4**7) or 0) > 0
    assert rates.launch_s is not None and 1e-8 < rates.launch_s < 1e-2
    assert rates.module_s is not None and rates.module_s < 1e-2
    assert set(rates.layer_s) == set(known.TINY_LAYERS.values())
    assert all(0 < seconds < 1e-2 for seconds in rates.layer_s.values()), rates.layer_s
    assert (rates.bytes_per_s(1e5) or 0) > 1e6 and (rates.update_s("adam", 4**7, 4) or 0) > 0


KINDS = {
    "tiny_conv2d": torch.nn.Conv2d,
    "tiny_linear": torch.nn.Linear,
    "tiny_batch_norm": torch.nn.BatchNorm2d,
    "tiny_activation": torch.nn.ReLU,
    "tiny_pooling": torch.nn.MaxPool2d,
}


@pytest.mark.parametrize("name", sorted(set(known.TINY_LAYERS.values())))
def test_a_tiny_chain_is_real_layers_of_its_kind_whose_gradients_stay_normal(name: str) -> None:
    """Each link its own module of the kind it prices; through 256 of them the input's gradient neither
    vanishes nor passes the subnormal floats a CPU computes slowly (a default-initialised chain of
    convolutions shrinks it to zero by way of them)."""
    from advisor.ops.workloads import tiny_chain

    chain, (x,) = tiny_chain(op_configs.tiny_chain(name, 256))
    assert isinstance(chain, torch.nn.Sequential) and len(chain) == 256
    assert all(isinstance(layer, KINDS.get(name, torch.nn.Module)) for layer in chain)
    x.requires_grad_(True)
    chain(x).sum().backward()
    assert x.grad is not None
    magnitudes = x.grad.abs()
    subnormal = (magnitudes > 0) & (magnitudes < torch.finfo(torch.float32).tiny)
    assert magnitudes.max() > 0 and not subnormal.any()


def test_scattered_measures_what_it_picks_again_after_itself_and_leaves_the_rest_in_order() -> None:
    items = list(range(40))
    placed = scattered(items, lambda n: n % 10 == 0, 3, seed=1)
    assert [n for n in placed if n % 10] == [n for n in items if n % 10], "the rest once, in order"
    assert len(placed) == 40 + 4 * 2
    for picked in (0, 10, 20, 30):
        at = [i for i, n in enumerate(placed) if n == picked]
        before = [n for n in placed[: at[0]] if n % 10]
        assert len(at) == 3 and before == [n for n in items[:picked] if n % 10], "first where it was"
    assert scattered(items, lambda n: n % 10 == 0, 1) == items
    assert scattered(items, lambda n: n % 10 == 0, 3, seed=1) == placed, "seeded: a plan is pure"


def test_the_nightly_plan_measures_each_update_at_its_places_and_a_check_plan_once() -> None:
    device = DeviceProfile.assumed("cpu")
    nightly = full_plan(device, fake_table)
    updates = [item.config for item in nightly.items if item.phase is Phase.UPDATES]
    assert len(updates) == CPU_SWEEPS.update_places * len(set(updates)) and CPU_SWEEPS.update_places == 4
    grid = build_plan(nightly_grid("cpu"), device, fake_table)
    assert len(nightly.items) == len(grid.items) + 3 * len(set(updates))
    checked = [item.config for item in check_plan(device, fake_table).items if item.phase is Phase.UPDATES]
    assert len(checked) == len(set(checked)) > 0
