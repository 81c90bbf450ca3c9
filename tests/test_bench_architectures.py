"""Tonight's plan from a real database: submitted architectures, what a machine measured, nights in a row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from advisor.bench.architectures import Architectures, NightOn, measured_at, measured_tables, plan_tonight
from advisor.bench.night import Priority, Tonight
from advisor.bench.plan import DeviceProfile, full_plan
from advisor.records import (
    Fingerprint,
    LayerConfig,
    LayerMeasurement,
    ResultLine,
    StepConfig,
    StepMeasurement,
)
from advisor.store import Store
from tests.plan_support import fake_table

T0 = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
GPU = Fingerprint(
    partition="a100",
    node="a100-1",
    device="cuda",
    gpu_name="NVIDIA A100-SXM4-80GB",
    gpu_count=1,
    gpu_memory_mb=81920,
    driver="550.54",
    cuda="12.4",
    cudnn="90100",
    cpu_model="x86",
    cpu_cores=8,
    torch="2.14.1",
)
SUBMITTED = "a_network_users_keep_submitting"


def _measured(night: Tonight, at: datetime, fingerprint: Fingerprint = GPU) -> list[ResultLine]:
    """What a job that measured every item of ``night`` would have written."""
    lines = []
    for entry in night.entries:
        config = entry.item.config
        measurement: StepMeasurement | LayerMeasurement
        if isinstance(config, StepConfig):
            measurement = StepMeasurement(
                config=config,
                arch_hash="0" * 64,
                steps=20,
                median_s=0.01,
                non_device_share=0.1,
                peak_memory_bytes=2**30,
                fits=True,
            )
        else:
            measurement = LayerMeasurement(config=config, median_s=0.001, fits=True)
        lines.append(
            ResultLine(
                run_id=f"run-{at:%d}", fingerprint=fingerprint, measured_at=at, measurement=measurement
            )
        )
    return lines


def _night(store: Store, at: datetime, partition: str = "a100") -> Tonight:
    return plan_tonight(store, NightOn(partition, "cuda", 4), 20 * 60, at, fake_table)


def test_a_submission_is_recorded_once_per_architecture_with_its_batches() -> None:
    store = Store.memory()
    architectures = Architectures(store)
    table = fake_table(SUBMITTED, 32)
    architectures.record(table, T0, batch=64)
    architectures.record(table, T0 + timedelta(hours=1), batch=256)
    architectures.record(fake_table("measured_by_hand_only", 32), T0, requested=False)
    architectures.record(fake_table("submitted_long_ago", 32), T0 - timedelta(days=60), batch=8)
    found = {a.model: a for a in architectures.since(T0 - timedelta(days=30))}
    assert set(found) == {SUBMITTED, "measured_by_hand_only"}
    assert found[SUBMITTED].requests == 2 and found[SUBMITTED].batches == (64, 256)
    assert found[SUBMITTED].table == table
    assert found["measured_by_hand_only"].requests == 0 and found["measured_by_hand_only"].batches == ()
    assert architectures.table(SUBMITTED, 32) == table and architectures.table(SUBMITTED, 64) is None
    assert measured_tables(store)(SUBMITTED, 32) == table, "training finds a submitted model's table"


def test_what_a_machine_measured_is_keyed_as_the_plan_keys_it() -> None:
    store = Store.memory()
    night = _night(store, T0)
    store.ingest(_measured(night, T0))
    store.ingest(_measured(night, T0 + timedelta(days=1))[:5])
    seen = measured_at(store, GPU.machine())
    assert set(seen) == {entry.item.config.key() for entry in night.entries}
    later = {entry.item.config.key() for entry in night.entries[:5]}
    assert {key for key, at in seen.items() if at > T0} == later
    assert store.latest_machines() == {"a100": GPU.machine()}


def test_after_simulated_nights_a_submitted_architecture_is_measured_first_then_the_grid_goes_on() -> None:
    store = Store.memory()
    first = _night(store, T0)
    assert first.machine is None and first.entries[0].priority is Priority.COARSE
    store.ingest(_measured(first, T0))
    # During the day a user asks for advice on an architecture no machine has measured.
    Architectures(store).record(fake_table(SUBMITTED, 32), T0 + timedelta(hours=10), batch=128)
    second = _night(store, T0 + timedelta(days=1))
    # Once its memory is known, what cannot fit it leaves the grid (the real-size transformers' largest).
    grid = full_plan(DeviceProfile.assumed("cuda", 81920 * 2**20), fake_table).items
    kept = {item.config.key() for item in grid} & {entry.item.config.key() for entry in first.entries}
    planned = {entry.item.config.key() for entry in first.entries}
    assert second.machine == GPU.machine() and second.covered == len(kept) > 0.9 * len(planned)
    assert second.entries[0].priority is Priority.SUBMITTED and second.entries[0].subject == SUBMITTED
    submitted = [entry for entry in second.entries if entry.priority is Priority.SUBMITTED]
    assert {type(entry.item.config) for entry in submitted} == {LayerConfig, StepConfig}
    done = {entry.item.config.key() for entry in first.entries}
    assert not done & {
        entry.item.config.key() for entry in second.entries if entry.priority is not Priority.FRESHNESS
    }
    store.ingest(_measured(second, T0 + timedelta(days=1)))
    third = _night(store, T0 + timedelta(days=2))
    assert Priority.SUBMITTED not in {entry.priority for entry in third.entries}, "measured once is enough"
    # Another partition of new hardware starts its own first night, whatever a100 measured.
    other = _night(store, T0 + timedelta(days=2), partition="h100")
    assert other.machine is None and other.entries[0].priority is Priority.COARSE
