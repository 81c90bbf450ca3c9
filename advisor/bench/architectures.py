"""What tonight's plan reads from the database: the architectures users submitted, and what each machine
measured when; and the layer table of any model a measurement names, for the predictors' training."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from advisor.bench.night import MeasuredOn, SubmittedArchitecture, Tonight, tonight
from advisor.bench.plan import DeviceKind, DeviceProfile, TableSource, nightly_grid
from advisor.bench.tables import model_table, zoo_table
from advisor.bench.zoo import zoo_sized
from advisor.introspect import LayerTable
from advisor.records import LayerConfig
from advisor.store import ARCHITECTURES, ArchitectureRow, LayerMeasurementRow, StepMeasurementRow, Store

SUBMITTED_WITHIN = timedelta(days=30)
"""Architectures submitted this recently are measured on the machines that lack them."""


class Architectures:
    """One row per architecture submitted for advice (by its hash): its layer table, the global batches it
    came with, how often, and when first and last."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def record(
        self, table: LayerTable, at: datetime, *, batch: int | None = None, requested: bool = True
    ) -> None:
        """``requested``: a request for advice, which counts; else a measurement by hand (`advisor bench run
        --architecture`), kept for its layer table."""
        with self.store.db.conn:
            found = next(
                iter(self.store.rows(ARCHITECTURES, "architecture_hash = ?", [table.architecture_hash])), None
            )
            batches = sorted({*([batch] if batch else []), *(json.loads(found.batches) if found else [])})
            row = ArchitectureRow(
                architecture_hash=table.architecture_hash,
                model=table.reference,
                input_shape=json.dumps(list(table.input_shape)),
                layer_table=found.layer_table if found else table.model_dump_json(),
                batches=json.dumps(batches),
                requests=(found.requests if found else 0) + requested,
                first_at=found.first_at if found else at,
                last_at=at,
            )
            self.store.upsert(ARCHITECTURES, row)

    def since(self, at: datetime) -> list[SubmittedArchitecture]:
        """Architectures submitted at or after ``at``, the most requested first."""
        return self._where("last_at >= ?", at)

    def first_since(self, at: datetime) -> list[SubmittedArchitecture]:
        """Architectures first seen at or after ``at``, the most requested first."""
        return self._where("first_at >= ?", at)

    def _where(self, condition: str, at: datetime) -> list[SubmittedArchitecture]:
        rows = self.store.rows(ARCHITECTURES, condition, [at.isoformat()], order_by="requests desc, model")
        return [
            SubmittedArchitecture(
                table=LayerTable.model_validate_json(row.layer_table),
                batches=tuple(json.loads(row.batches)),
                requests=row.requests,
            )
            for row in rows
        ]

    def table(self, model: str, input_size: int) -> LayerTable | None:
        """The recorded table of ``model`` on a square RGB input, where one was submitted or measured."""
        shape = json.dumps([3, input_size, input_size])
        rows = self.store.rows(
            ARCHITECTURES, "model = ? AND input_shape = ?", [model, shape], order_by="last_at desc", limit=1
        )
        return LayerTable.model_validate_json(rows[0].layer_table) if rows else None


def measured_geometries(store: Store, machine: str) -> set[LayerConfig]:
    """The layer geometries ``machine`` has measured at any batch (as `distinct_layers` gives them)."""
    return {
        row.config().model_copy(update={"batch": 1, "amp": False, "cudnn_benchmark": True})
        for row in store.layer_rows(machine)
    }


def measured_at(store: Store, machine: str) -> dict[str, datetime]:
    """When ``machine`` last measured each configuration, by the configuration's key; a measurement that
    did not fit counts: measuring it again would say the same."""
    last: dict[str, datetime] = {}
    rows: list[StepMeasurementRow | LayerMeasurementRow] = [
        *store.step_rows(machine),
        *store.layer_rows(machine),
    ]
    for row in rows:
        key, at = row.config().key(), row.measured_at
        last[key] = max(at, last.get(key, at))
    return last


def measured_tables(store: Store) -> TableSource:
    """A model's layer table as training needs it: the zoo's as the benchmark builds it, else the one
    recorded when the architecture was submitted or measured, else a torchvision model's introspected here
    (never a factory: that needs the user's own process)."""

    def table(model: str, input_size: int) -> LayerTable:
        if zoo_sized(model, input_size) is not None:
            return zoo_table(model, input_size)
        recorded = Architectures(store).table(model, input_size)
        return recorded if recorded is not None else model_table(model, input_size)

    return table


@dataclass(frozen=True)
class NightOn:
    """Where a night's benchmark job runs: its partition (None: none named), that partition's device kind,
    and the data-loader workers its CPUs allow."""

    partition: str | None
    kind: DeviceKind
    workers: int


def plan_tonight(
    store: Store | None, on: NightOn, budget_s: float, now: datetime, tables: TableSource = zoo_table
) -> Tonight:
    """Tonight's plan for ``on.partition``'s machine as its latest benchmark found it (a partition never
    benchmarked, or none named: a new machine's first night; no store: nothing submitted either)."""
    partition, kind = on.partition, on.kind
    machine = None if store is None or partition is None else store.latest_machines().get(partition)
    measured = measured_at(store, machine) if store is not None and machine else {}
    fingerprints = store.fingerprints() if store is not None else []
    memory = [f.gpu_memory_mb for f in fingerprints if f.machine() == machine and f.gpu_memory_mb]
    profile = DeviceProfile.assumed(kind, min(memory) * 2**20 if memory else None)
    submitted = Architectures(store).since(now - SUBMITTED_WITHIN) if store is not None else []
    grid = nightly_grid(kind, workers=on.workers)
    return tonight(grid, profile, tables, MeasuredOn(machine, measured), submitted, budget_s)
