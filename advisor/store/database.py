"""The advisor's SQLite database: one file in WAL mode, shared by the daemon, the CLI and the nightly run;
`Store` opens it (creating or upgrading its tables) and keeps the benchmarks' measurements.

Measurements are keyed by their content, so ingesting the same results twice stores each row once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlite_utils import Database

from advisor.frozen import Frozen
from advisor.records import Fingerprint, ResultLine, StepMeasurement
from advisor.store.advised_jobs import ADVISED_JOBS
from advisor.store.allreduce import ALLREDUCE
from advisor.store.architectures import ARCHITECTURES
from advisor.store.audit import AUDIT
from advisor.store.fingerprints import FINGERPRINTS, FingerprintRow
from advisor.store.layer_measurements import LAYER_MEASUREMENTS, LayerMeasurementRow
from advisor.store.model_versions import MODEL_VERSIONS
from advisor.store.step_measurements import STEP_MEASUREMENTS, StepMeasurementRow
from advisor.store.table import Table
from advisor.store.whole_steps import WHOLE_STEPS

R = TypeVar("R", bound=Frozen)

TABLES: tuple[Table[Any], ...] = (
    FINGERPRINTS,
    STEP_MEASUREMENTS,
    LAYER_MEASUREMENTS,
    MODEL_VERSIONS,
    ADVISED_JOBS,
    AUDIT,
    ARCHITECTURES,
    ALLREDUCE,
    WHOLE_STEPS,
)
"""Every table of the database, each defined in its own module."""

SCHEMA_VERSION = 6
"""``PRAGMA user_version`` of a database this version wrote. 1: before it was kept (the tables as they were);
2: the audit's ``offered`` column; 3: the ``architectures`` users submitted; 4: each model version's
``sha256`` and ``quarantined`` (`advisor.predict.model_files`); 5: each advised job's p10, calibration key,
architecture and start-up plus one epoch (`advisor.predict.calibration`); 6: the correction already in each
advised job's prediction. Each later version only adds tables and columns, which `Store` does when it opens
an older database, so an upgrade needs no step; an older advisor refuses a newer database rather than write
to tables it does not know."""

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

    @classmethod
    def memory(cls) -> Store:
        """A database of this process alone, gone when it closes: unit tests' store, with every table."""
        return cls(Database(sqlite3.connect(":memory:", check_same_thread=False)))

    def rows(
        self,
        table: Table[R],
        where: str | None = None,
        args: Sequence[object] = (),
        *,
        order_by: str | None = None,
        limit: int | None = None,
    ) -> list[R]:
        """``table``'s rows ``where`` holds (SQL over its columns), as its row type."""
        found = self.db.table(table.name).rows_where(
            where, list(args), order_by=order_by, limit=limit, select=table.select()
        )
        return table.parse(found)

    def ingest(self, lines: Iterable[ResultLine]) -> int:
        """Store measurements in one transaction; returns how many were new."""
        before = self.count()
        with self.db.conn:
            for line in lines:
                self.upsert(FINGERPRINTS, FingerprintRow.of(line.fingerprint))
                if isinstance(line.measurement, StepMeasurement):
                    self.upsert(STEP_MEASUREMENTS, StepMeasurementRow.of(line, line.measurement))
                else:
                    self.upsert(LAYER_MEASUREMENTS, LayerMeasurementRow.of(line, line.measurement))
        return self.count() - before

    def count(self) -> int:
        return sum(self.db.table(table.name).count for table in (STEP_MEASUREMENTS, LAYER_MEASUREMENTS))

    def fingerprints(self) -> list[Fingerprint]:
        return [row.fingerprint() for row in self.rows(FINGERPRINTS)]

    def step_rows(self, machine: str | None = None) -> list[StepMeasurementRow]:
        return self.rows(STEP_MEASUREMENTS, *_of_machine(machine))

    def layer_rows(self, machine: str | None = None) -> list[LayerMeasurementRow]:
        return self.rows(LAYER_MEASUREMENTS, *_of_machine(machine))

    def benchmark_coverage(self) -> list[BenchmarkCoverage]:
        """Per partition and machine: the last step measured and how many were."""
        return [
            BenchmarkCoverage(partition=row[0], machine=row[1], last=row[2], rows=row[3])
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

    def upsert(self, table: Table[R], row: R) -> None:
        """Writes ``row``, replacing the one of its key (a measurement ingested twice is stored once)."""
        self.db.table(table.name).upsert(table.values(row), pk=table.key)

    def _create_tables(self) -> None:
        """The whole schema, once per connection: the wrappers only read and write."""
        for table in TABLES:
            created = self.db.table(table.name)
            columns = table.columns()
            created.create(columns, pk=table.key, if_not_exists=True)
            present = created.columns_dict
            for column, kind in columns.items():
                if column not in present:
                    created.add_column(column, kind)
            for index in table.indexes:
                created.create_index([index], if_not_exists=True)


class BenchmarkCoverage(Frozen):
    """What one partition's machine has measured: its last step and how many."""

    partition: str | None
    machine: str
    last: datetime
    rows: int


def _of_machine(machine: str | None) -> tuple[str | None, list[str]]:
    return (None, []) if machine is None else ("machine = ?", [machine])
