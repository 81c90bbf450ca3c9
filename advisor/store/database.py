"""The advisor's SQLite database: one file in WAL mode, shared by the daemon, the CLI and the nightly run;
`Store` opens it (creating or upgrading its tables) and keeps the benchmarks' measurements.

Measurements are keyed by their content, so ingesting the same results twice stores each row once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlite_utils import Database
from sqlite_utils.db import Table

from advisor.records import (
    Fingerprint,
    LayerConfig,
    LayerMeasurement,
    ResultLine,
    StepConfig,
    StepMeasurement,
)
from advisor.store.schema import (
    ADVISED_COLUMNS,
    ARCHITECTURE_COLUMNS,
    AUDIT_COLUMNS,
    FINGERPRINT_COLUMNS,
    LAYER_COLUMNS,
    MODEL_COLUMNS,
    SCHEMA_VERSION,
    STEP_COLUMNS,
)

BUSY_TIMEOUT_S = 30.0


class NoDatabase(FileNotFoundError):
    """A command that reads the advisor's database was pointed at none."""


class NewerDatabase(RuntimeError):
    """The database was written by a newer advisor: a downgrade needs the backup taken before the upgrade."""


class Store:
    """Typed access to the database; callers never write SQL for its tables (`advisor.store.schema`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        found = int(db.execute("PRAGMA user_version").fetchone()[0])
        if found > SCHEMA_VERSION:
            raise NewerDatabase(
                f"the advisor database is of schema version {found}, newer than this advisor's "
                f"({SCHEMA_VERSION}): upgrade the advisor, or restore the backup taken before the upgrade"
            )
        self._create_tables()
        if found < SCHEMA_VERSION:
            with db.conn:
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @classmethod
    def existing(cls, path: Path) -> Store:
        """The database a command only reads (or adds to what the service keeps): it never creates an
        empty one where an admin mistyped the path or forgot the service's settings."""
        if not path.is_file():
            raise NoDatabase(
                f"no advisor database at {path}: name the service's with --db, or with `database` in the "
                "settings file (advisor --config FILE, $ADVISOR_CONFIG or /etc/advisor/advisor.toml)"
            )
        return cls.open(path)

    @classmethod
    def open(cls, path: Path, any_thread: bool = False) -> Store:
        """``any_thread``: for a pool whose connections serve one thread at a time, each time another."""
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=not any_thread)
        db = Database(connection)
        db.enable_wal()
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        # In WAL mode NORMAL still survives any crash of a process; only a power cut may drop the last
        # commits (never corrupting the file), and the daemon's audit write no longer waits for a disk flush.
        db.execute("PRAGMA synchronous = NORMAL")
        return cls(db)

    def ingest(self, lines: Iterable[ResultLine]) -> int:
        """Store measurements in one transaction; returns how many were new."""
        before = self.count()
        with self.db.conn:
            for line in lines:
                fingerprint = line.fingerprint
                self.db.table("fingerprints").upsert(_fingerprint_row(fingerprint), pk="key")
                if isinstance(line.measurement, StepMeasurement):
                    self.db.table("step_measurements").upsert(_step_row(line, line.measurement), pk="key")
                else:
                    self.db.table("layer_measurements").upsert(_layer_row(line, line.measurement), pk="key")
        return self.count() - before

    def count(self) -> int:
        return self.db.table("step_measurements").count + self.db.table("layer_measurements").count

    def fingerprints(self) -> list[Fingerprint]:
        rows = self.db.table("fingerprints").rows
        return [
            Fingerprint.model_validate({k: v for k, v in row.items() if k not in {"key", "machine"}})
            for row in rows
        ]

    def step_rows(self, machine: str | None = None) -> list[dict[str, Any]]:
        where = None if machine is None else "machine = ?"
        return list(self.db.table("step_measurements").rows_where(where, [machine] if machine else []))

    def layer_rows(self, machine: str | None = None) -> list[dict[str, Any]]:
        where = None if machine is None else "machine = ?"
        return list(self.db.table("layer_measurements").rows_where(where, [machine] if machine else []))

    def benchmark_coverage(self) -> list[dict[str, Any]]:
        """Per partition and machine: the last step measured and how many were."""
        return [
            {"partition": row[0], "machine": row[1], "last": row[2], "rows": row[3]}
            for row in self.db.execute(
                "SELECT f.partition, s.machine, MAX(s.measured_at), COUNT(*) FROM step_measurements s "
                "JOIN fingerprints f ON f.key = s.fingerprint GROUP BY f.partition, s.machine ORDER BY 1"
            ).fetchall()
        ]

    def latest_machines(self) -> dict[str, str]:
        """Each partition's machine as its latest benchmark found it."""
        latest: dict[str, tuple[str, str]] = {}
        for partition, machine, at in self.db.execute(
            "SELECT f.partition, f.machine, MAX(s.measured_at) FROM fingerprints f JOIN ("
            "SELECT fingerprint, measured_at FROM step_measurements UNION ALL "
            "SELECT fingerprint, measured_at FROM layer_measurements) s ON s.fingerprint = f.key "
            "WHERE f.partition IS NOT NULL GROUP BY f.partition, f.machine"
        ).fetchall():
            if partition not in latest or at > latest[partition][1]:
                latest[partition] = (machine, at)
        return {partition: machine for partition, (machine, _) in latest.items()}

    def _create_tables(self) -> None:
        """The whole schema, once per connection: the wrappers below only read and write."""
        self._table("fingerprints", FINGERPRINT_COLUMNS, "key")
        for name, columns in (("step_measurements", STEP_COLUMNS), ("layer_measurements", LAYER_COLUMNS)):
            self._table(name, columns, "key").create_index(["machine"], if_not_exists=True)
        self._table("model_versions", MODEL_COLUMNS, ("machine", "version"))
        self._table("advised_jobs", ADVISED_COLUMNS, "job_id")
        self._table("audit", AUDIT_COLUMNS, "request_id").create_index(["job_id"], if_not_exists=True)
        self._table("architectures", ARCHITECTURE_COLUMNS, "architecture_hash")

    def _table(self, name: str, columns: dict[str, Any], pk: str | tuple[str, ...]) -> Table:
        """``name``, created if missing, with any column a database from an older version lacks."""
        table = self.db.table(name)
        table.create(columns, pk=pk, if_not_exists=True)
        present = table.columns_dict
        for column, kind in columns.items():
            if column not in present:
                table.add_column(column, kind)
        return table


def step_config_of(row: dict[str, Any]) -> StepConfig:
    """The configuration a step row measured."""
    return StepConfig(
        model=row["model"],
        input_size=row["input_size"],
        batch=row["batch"],
        amp=bool(row["amp"]),
        channels_last=bool(row["channels_last"]),
        pinned=bool(row["pinned"]),
        workers=row["workers"],
    )


def layer_config_of(row: dict[str, Any]) -> LayerConfig:
    """The configuration a layer row measured."""
    return LayerConfig(
        op=row["op"],
        in_channels=row["in_channels"],
        out_channels=row["out_channels"],
        kernel=_pair(row["kernel"]),
        stride=_pair(row["stride"]),
        padding=_pair(row["padding"]),
        dilation=_pair(row["dilation"]),
        groups=row["groups"],
        height=row["height"],
        width=row["width"],
        batch=row["batch"],
        amp=bool(row["amp"]),
        cudnn_benchmark=bool(row["cudnn_benchmark"]),
    )


def _pair(text: str) -> tuple[int, int]:
    first, second = text.split("x")
    return int(first), int(second)


def _fingerprint_row(fingerprint: Fingerprint) -> dict[str, Any]:
    return {"key": fingerprint.key(), "machine": fingerprint.machine(), **fingerprint.model_dump()}


def _common(line: ResultLine, median_s: float | None, fits: bool, error: str | None) -> dict[str, Any]:
    return {
        "key": line.key(),
        "run_id": line.run_id,
        "fingerprint": line.fingerprint.key(),
        "machine": line.fingerprint.machine(),
        "measured_at": line.measured_at.isoformat(),
        "median_s": median_s,
        "fits": int(fits),
        "error": error,
    }


def _step_row(line: ResultLine, step: StepMeasurement) -> dict[str, Any]:
    config = step.config
    return {
        **_common(line, step.median_s, step.fits, step.error),
        **config.model_dump(),
        "amp": int(config.amp),
        "channels_last": int(config.channels_last),
        "pinned": int(config.pinned),
        "arch_hash": step.arch_hash,
        "steps": step.steps,
        "non_device_share": step.non_device_share,
        "peak_memory_bytes": step.peak_memory_bytes,
        "pace_ratio": step.pace_ratio,
        "pace_s": step.pace_s,
    }


def _layer_row(line: ResultLine, layer: LayerMeasurement) -> dict[str, Any]:
    config = layer.config
    pairs = {
        name: "x".join(map(str, getattr(config, name)))
        for name in ("kernel", "stride", "padding", "dilation")
    }
    return {
        **_common(line, layer.median_s, layer.fits, layer.error),
        **config.model_dump(),
        **pairs,
        "depthwise": int(config.depthwise),
        "grouped": int(config.grouped),
        "amp": int(config.amp),
        "cudnn_benchmark": int(config.cudnn_benchmark),
        "pace_ratio": layer.pace_ratio,
        "pace_s": layer.pace_s,
    }
