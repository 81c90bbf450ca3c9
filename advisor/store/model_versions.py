"""The ``model_versions`` table and `ModelRegistry`: which predictor file serves each machine, the active
version's row and every earlier one kept."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.frozen import Frozen
from advisor.store.table import Table

if TYPE_CHECKING:
    from advisor.store.database import Store


class ModelVersionRow(Frozen):
    machine: str
    version: int
    path: Path
    created_at: datetime
    active: bool = False
    step_rows: int
    layer_rows: int
    models: str
    """The benchmarked models it was trained on, comma-separated."""
    measured_from: datetime | None = None
    measured_to: datetime | None = None
    heldout_mape: float | None = None
    sha256: str | None = None
    """The file's digest, written with it: a file that differs never reaches xgboost."""
    quarantined: str | None = None
    """Why the file was moved aside (its checksum failed, ...); None while it serves."""


MODEL_VERSIONS = Table("model_versions", ModelVersionRow, ("machine", "version"))


class ModelRegistry:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.db = store.db

    def add_version(self, machine: str, write: Callable[[int], ModelVersionRow], activate: bool) -> int:
        """Numbers, writes and records a new version under the database's write lock, so two trainers
        (the timer, an admin) never take one number; ``write(version)`` writes the file and returns the
        row. A crash inside leaves no row: the number is taken again and its file overwritten."""
        connection = self.db.conn
        connection.execute("BEGIN IMMEDIATE")
        try:
            rows = connection.execute("SELECT MAX(version) FROM model_versions WHERE machine = ?", [machine])
            latest = rows.fetchone()[0]
            version = 1 if latest is None else int(latest) + 1
            row = write(version).model_copy(update={"machine": machine, "version": version, "active": False})
            if activate:
                connection.execute("UPDATE model_versions SET active = 0 WHERE machine = ?", [machine])
            self.db.table(MODEL_VERSIONS.name).insert(MODEL_VERSIONS.values(row))
            connection.execute(
                "UPDATE model_versions SET active = ? WHERE machine = ? AND version = ?",
                [int(activate), machine, version],
            )
        except BaseException:
            connection.rollback()
            raise
        connection.commit()
        return version

    def set_active(self, machine: str, version: int) -> None:
        """Makes ``version`` the machine's only active one (a rollback, or a version the gate held back)."""
        with self.db.conn:
            found = self.db.execute(
                "SELECT 1 FROM model_versions WHERE machine = ? AND version = ?", [machine, version]
            ).fetchone()
            if found is None:
                raise LookupError(f"{machine} has no version {version}")
            why = self.quarantined(machine, version)
            if why is not None:
                raise LookupError(f"{machine} version {version} {why}: quarantined; train a new one")
            self.db.execute(
                "UPDATE model_versions SET active = (version = ?) WHERE machine = ?", [version, machine]
            )

    def quarantined(self, machine: str, version: int) -> str | None:
        row = self.db.execute(
            "SELECT quarantined FROM model_versions WHERE machine = ? AND version = ?", [machine, version]
        ).fetchone()
        return None if row is None else row[0]

    def quarantine(self, machine: str, version: int, why: str) -> None:
        """Marks a version whose file failed its check; the first reason found stays."""
        with self.db.conn:
            self.db.execute(
                "UPDATE model_versions SET quarantined = ? "
                "WHERE machine = ? AND version = ? AND quarantined IS NULL",
                [why, machine, version],
            )

    def record_sha256(self, machine: str, version: int, sha256: str) -> None:
        """A version trained before digests were kept, once a check process has loaded it whole."""
        with self.db.conn:
            self.db.execute(
                "UPDATE model_versions SET sha256 = ? WHERE machine = ? AND version = ? AND sha256 IS NULL",
                [sha256, machine, version],
            )

    def active(self, machine: str) -> ModelVersionRow | None:
        rows = self.store.rows(MODEL_VERSIONS, "machine = ? AND active = 1", [machine], limit=1)
        return next(iter(rows), None)

    def all_active(self) -> list[ModelVersionRow]:
        return self.store.rows(MODEL_VERSIONS, "active = 1", order_by="machine")

    def versions(self, machine: str | None = None) -> list[ModelVersionRow]:
        where = None if machine is None else "machine = ?"
        return self.store.rows(
            MODEL_VERSIONS, where, [machine] if machine else [], order_by="machine, version"
        )
