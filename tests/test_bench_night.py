"""Tonight's plan: a budget, priorities, and memory of earlier nights (pure; fake layer tables)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from advisor.bench.night import MeasuredOn, Priority, SubmittedArchitecture, Tonight, describe_night, tonight
from advisor.bench.plan import DeviceProfile, Phase, build_plan, nightly_grid
from advisor.bench.plan_rows import SWEPT
from advisor.records import LayerConfig, StepConfig
from tests.plan_support import fake_table

GRID = nightly_grid("cuda")
DEVICE = DeviceProfile.assumed("cuda", memory_bytes=80 * 2**30)
BUDGET_S = 20 * 60.0
T0 = datetime(2026, 11, 1, 1, 0, tzinfo=UTC)
FULL = build_plan(GRID, DEVICE, fake_table)


UPDATE_CONFIGS = 3 * 6 * 3 + 6
"""The CPU sweep's updates: three optimizers, six parameter counts, in 1, 64 and 256 tensors; and the
gradients' release of each count in one tensor."""


def _night(
    measured: dict[str, datetime], submitted: list[SubmittedArchitecture], budget_s: float = BUDGET_S
) -> Tonight:
    return tonight(GRID, DEVICE, fake_table, MeasuredOn("m1", measured), submitted, budget_s)


def _submitted(model: str, requests: int = 1, batch: int = 64) -> SubmittedArchitecture:
    # fake_table's channels follow the name's length: these names are longer than any zoo model's.
    return SubmittedArchitecture(table=fake_table(model, 32), batches=(batch,), requests=requests)


def _measured(night: Tonight, at: datetime) -> dict[str, datetime]:
    return {entry.item.config.key(): at for entry in night.entries}


def _everything(at: datetime) -> dict[str, datetime]:
    return {item.config.key(): at for item in FULL.items}


@pytest.mark.parametrize("budget_min", [1, 5, 20, 120])
@pytest.mark.parametrize("history", ["none", "half", "all"])
def test_a_plan_never_plans_past_its_budget(budget_min: int, history: str) -> None:
    items = {"none": [], "half": FULL.items[: len(FULL.items) // 2], "all": FULL.items}[history]
    measured = {item.config.key(): T0 for item in items}
    night = _night(measured, [_submitted("a_network_nobody_has_measured_yet", 3)], budget_min * 60.0)
    assert night.entries and night.estimate_s <= budget_min * 60.0
    assert sum(row.estimate_s for row in describe_night(night)) == pytest.approx(night.estimate_s)


def test_a_new_machine_starts_with_the_coarse_grid_in_the_grids_order() -> None:
    budget_s = 5 * 60.0
    night = _night({}, [], budget_s)
    coarse = [item for item in FULL.items if item.phase is Phase.COARSE]
    assert night.entries[0].priority is Priority.COARSE
    assert sum(item.estimate_s for item in coarse) > budget_s, "the coarse grid alone takes more than a night"
    priorities = [list(Priority).index(entry.priority) for entry in night.entries]
    assert priorities == sorted(priorities), "the coarse grid first; what is left of the budget, the rest"
    first = [entry.item for entry in night.entries if entry.priority is Priority.COARSE]
    sweeps = [item for item in FULL.items if item.phase in SWEPT]
    assert first[: len(sweeps)] == sweeps, "a new machine's rates first: every prediction uses them"
    assert {entry.subject for entry in night.entries[: len(sweeps)]} == {f"{p} sweep" for p in SWEPT}
    planned = first[len(sweeps) :]
    assert planned[:10] == coarse[:10], "then the coarse grid from its start"
    order = {item.config.key(): index for index, item in enumerate(coarse)}
    assert [order[item.config.key()] for item in planned] == sorted(order[i.config.key()] for i in planned)
    assert len(planned) < len(coarse)
    assert night.covered == 0 and night.grid_items == len(FULL.items)


def test_an_architecture_submitted_yesterday_comes_before_the_grid_and_the_freshness_slice() -> None:
    coarse_done = {item.config.key(): T0 for item in FULL.items if item.phase in (Phase.COARSE, *SWEPT)}
    few, many = (
        _submitted("an_architecture_asked_for_once_only"),
        _submitted("one_that_users_submit_all_the_time", 9),
    )
    for measured in (coarse_done, _everything(T0)):
        night = _night(measured, [few, many])
        priorities = [entry.priority for entry in night.entries]
        first_other = next(i for i, p in enumerate(priorities) if p is not Priority.SUBMITTED)
        assert set(priorities[:first_other]) == {Priority.SUBMITTED}
        assert Priority.SUBMITTED not in priorities[first_other:]
        assert priorities[first_other] is (Priority.GRID if measured is coarse_done else Priority.FRESHNESS)
        subjects = [entry.subject for entry in night.entries[:first_other]]
        assert subjects.index(many.model) < subjects.index(few.model), "the most requested first"
        own = [entry.item.config for entry in night.entries if entry.subject == many.model]
        layers = [config for config in own if isinstance(config, LayerConfig)]
        steps = [config for config in own if isinstance(config, StepConfig)]
        assert {config.batch for config in layers} == set(GRID.layer_batches)
        assert [config.batch for config in steps] == [4, 16, 64], "two coarse batches below its own"
        assert {(config.in_channels, config.out_channels) for config in layers} >= {(3, 8 + len(many.model))}


def test_a_factory_gets_its_layers_measured_but_never_a_whole_step() -> None:
    factory = SubmittedArchitecture(
        table=fake_table("lab.nets:wide_resnet_variant", 32),
        batches=(32,),
        requests=1,
    )
    night = _night(_everything(T0), [factory])
    own = [entry.item.config for entry in night.entries if entry.priority is Priority.SUBMITTED]
    assert own and all(isinstance(config, LayerConfig) for config in own)


def test_a_second_night_continues_where_the_first_stopped() -> None:
    first = _night({}, [])
    second = _night(_measured(first, T0), [])
    new = [entry for entry in second.entries if entry.priority is not Priority.FRESHNESS]
    assert {e.item.config.key() for e in new}.isdisjoint(_measured(first, T0))
    done = _measured(first, T0)
    untouched = [item for item in FULL.items if item.config.key() not in done]
    assert new[0].item == untouched[0], "the next night starts at the first item the first night left"
    assert second.covered == len(done)
    fresh = [entry for entry in second.entries if entry.priority is Priority.FRESHNESS]
    assert fresh and sum(e.item.estimate_s for e in fresh) <= BUDGET_S * 0.15 + max(
        e.item.estimate_s for e in new
    )


def test_freshness_measures_the_oldest_results_first() -> None:
    measured = _everything(T0)
    recent = FULL.items[:100]
    measured |= {item.config.key(): T0 + timedelta(days=3) for item in recent}
    night = _night(measured, [])
    assert {entry.priority for entry in night.entries} == {Priority.FRESHNESS}
    assert not {entry.item.config.key() for entry in night.entries} & {item.config.key() for item in recent}


def test_tonight_travels_as_json_to_the_job() -> None:
    night = _night({}, [_submitted("a_network_nobody_has_measured_yet")])
    again = Tonight.model_validate_json(night.model_dump_json())
    assert again == night and again.plan().items == tuple(entry.item for entry in night.entries)


def test_a_cpu_night_counts_its_grid_once_and_leaves_the_steps_second_pass_to_freshness() -> None:
    grid, device = nightly_grid("cpu"), DeviceProfile.assumed("cpu")
    full = build_plan(grid, device, fake_table)
    first_pass = [item for item in full.items if item.phase is not Phase.REPEATS]
    assert len(first_pass) < len(full.items), "the CPU grid measures its steps twice"
    night = tonight(grid, device, fake_table, MeasuredOn(None, {}), [], 24 * 3600.0)
    keys = [entry.item.config.key() for entry in night.entries if entry.item.phase is not Phase.UPDATES]
    updates = [entry.item.config.key() for entry in night.entries if entry.item.phase is Phase.UPDATES]
    assert night.grid_items == len(first_pass) == len(keys) + len(set(updates))
    assert len(keys) == len(set(keys))
    assert len(updates) == grid.sweeps.update_places * len(set(updates)) == 4 * UPDATE_CONFIGS


def test_a_new_machines_updates_are_measured_at_four_places_spread_through_its_night() -> None:
    """Where it is and three random places after it, each copy on its own; paid within the budget; and a
    machine that has them measures them once, when freshness wants them."""
    grid, device = nightly_grid("cpu"), DeviceProfile.assumed("cpu")
    night = tonight(grid, device, fake_table, MeasuredOn(None, {}), [], 45 * 60.0)
    assert night.estimate_s <= 45 * 60.0
    places: dict[str, list[int]] = {}
    for index, entry in enumerate(night.entries):
        if entry.item.phase is Phase.UPDATES:
            places.setdefault(entry.item.config.key(), []).append(index)
    assert len(places) == UPDATE_CONFIGS and all(len(at) == 4 for at in places.values())
    later = sorted(index for at in places.values() for index in at[1:])
    assert later[-1] - later[0] > len(night.entries) / 2, "spread through the night, not a block"
    assert len({at[1] - at[0] for at in places.values()}) > 30, "each copy at a place of its own"
    measured = {entry.item.config.key(): T0 for entry in night.entries}
    again = tonight(grid, device, fake_table, MeasuredOn("m1", measured), [], 45 * 60.0)
    keys = [entry.item.config.key() for entry in again.entries]
    assert len(keys) == len(set(keys))


def test_a_night_too_short_for_the_updates_copies_measures_them_once() -> None:
    grid, device = nightly_grid("cpu"), DeviceProfile.assumed("cpu")
    full = build_plan(grid, device, fake_table)
    sweeps_s = sum(item.estimate_s for item in full.items if item.phase in SWEPT)
    night = tonight(grid, device, fake_table, MeasuredOn(None, {}), [], sweeps_s + 1.0)
    updates = [entry.item.config.key() for entry in night.entries if entry.item.phase is Phase.UPDATES]
    assert night.estimate_s <= sweeps_s + 1.0 and len(updates) == len(set(updates)) == UPDATE_CONFIGS
