"""The retraining use case (`retrain_all`): every benchmarked machine's predictors trained again from the
store, each new version activated unless the quality gate holds it back. `advisor models train` runs it on
demand and the daemon after a night has added rows; each says the outcome in its own way."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from advisor.bench.architectures import measured_tables
from advisor.predict.machine import NotEnoughDataError
from advisor.predict.registry import TrainedVersion, machines, train_machine
from advisor.store import Store


@dataclass(frozen=True)
class Retrained:
    """One machine's outcome: its new version, or why it has none (its active version, if any, stays)."""

    machine: str
    trained: TrainedVersion | None
    error: NotEnoughDataError | None = None


def retrain_all(store: Store, models_dir: Path, max_worse_mape: float | None) -> list[Retrained]:
    """Each machine in turn, by hash; one that lacks data does not keep the others from their new versions."""
    tables = measured_tables(store)
    outcomes: list[Retrained] = []
    for machine in machines(store):
        try:
            trained = train_machine(store, machine, models_dir, tables, max_worse_mape=max_worse_mape)
        except NotEnoughDataError as error:
            outcomes.append(Retrained(machine=machine, trained=None, error=error))
            continue
        outcomes.append(Retrained(machine=machine, trained=trained))
    return outcomes
