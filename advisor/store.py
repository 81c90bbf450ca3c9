"""The advisor's SQLite database: one file in WAL mode, shared by the daemon, the CLI and the nightly run.

Measurements are keyed by their content, so ingesting the same results twice stores each row once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from datetime import datetime
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
from advisor.wait.accuracy import WaitRecord

BUSY_TIMEOUT_S = 30.0

_FINGERPRINT_COLUMNS: dict[str, Any] = {
    "key": str,
    "machine": str,
    "partition": str,
    "node": str,
    "device": str,
    "gpu_name": str,
    "gpu_count": int,
    "gpu_memory_mb": int,
    "driver": str,
    "cuda": str,
    "cudnn": str,
    "cpu_model": str,
    "cpu_cores": int,
    "torch": str,
    "cpu_quota": float,
}
_COMMON: dict[str, Any] = {
    "key": str,
    "run_id": str,
    "fingerprint": str,
    "machine": str,
    "measured_at": str,
    "median_s": float,
    "fits": int,
    "error": str,
}
_STEP_COLUMNS: dict[str, Any] = {
    **_COMMON,
    "model": str,
    "input_size": int,
    "batch": int,
    "amp": int,
    "channels_last": int,
    "pinned": int,
    "workers": int,
    "arch_hash": str,
    "steps": int,
    "non_device_share": float,
    "peak_memory_bytes": int,
    "pace_ratio": float,
    "pace_s": float,
}
_LAYER_COLUMNS: dict[str, Any] = {
    **_COMMON,
    "op": str,
    "in_channels": int,
    "out_channels": int,
    "kernel": str,
    "stride": str,
    "padding": str,
    "dilation": str,
    "groups": int,
    "depthwise": int,
    "grouped": int,
    "height": int,
    "width": int,
    "batch": int,
    "amp": int,
    "cudnn_benchmark": int,
    "pace_ratio": float,
    "pace_s": float,
}


_ARCHITECTURE_COLUMNS: dict[str, Any] = {
    "architecture_hash": str,
    "model": str,
    "input_shape": str,
    "layer_table": str,
    "batches": str,
    "requests": int,
    "first_at": str,
    "last_at": str,
}

SCHEMA_VERSION = 4
"""``PRAGMA user_version`` of a database this version wrote. 1: before it was kept (the tables as they were);
2: the audit's ``offered`` column; 3: the ``architectures`` users submitted; 4: each model version's
``sha256`` and ``quarantined`` (`advisor.predict.model_files`). Each later version only adds
tables and columns, which `Store` does when it opens an older database, so an upgrade needs no step; an older
advisor refuses a newer database rather than write to tables it does not know."""


class NoDatabase(FileNotFoundError):
    """A command that reads the advisor's database was pointed at none."""


class NewerDatabase(RuntimeError):
    """The database was written by a newer advisor: a downgrade needs the backup taken before the upgrade."""


class Store:
    """Typed access to the database; callers never write SQL for the tables defined here."""

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
        self._table("fingerprints", _FINGERPRINT_COLUMNS, "key")
        for name, columns in (("step_measurements", _STEP_COLUMNS), ("layer_measurements", _LAYER_COLUMNS)):
            self._table(name, columns, "key").create_index(["machine"], if_not_exists=True)
        self._table("model_versions", _MODEL_COLUMNS, ("machine", "version"))
        self._table("advised_jobs", _ADVISED_COLUMNS, "job_id")
        self._table("audit", _AUDIT_COLUMNS, "request_id").create_index(["job_id"], if_not_exists=True)
        self._table("architectures", _ARCHITECTURE_COLUMNS, "architecture_hash")

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


_MODEL_COLUMNS: dict[str, Any] = {
    "machine": str,
    "version": int,
    "path": str,
    "created_at": str,
    "active": int,
    "step_rows": int,
    "layer_rows": int,
    "models": str,
    "measured_from": str,
    "measured_to": str,
    "heldout_mape": float,
    "sha256": str,  # the file's digest, written with it: a file that differs never reaches xgboost
    "quarantined": str,  # why the file was moved aside (its checksum failed, ...); None while it serves
}


class ModelRegistry:
    """Which predictor file serves each machine: the active version's row, every earlier one kept."""

    def __init__(self, store: Store) -> None:
        self.db = store.db

    def add_version(self, machine: str, write: Callable[[int], dict[str, Any]], activate: bool) -> int:
        """Numbers, writes and records a new version under the database's write lock, so two trainers
        (the timer, an admin) never take one number; ``write(version)`` writes the file and returns the
        row. A crash inside leaves no row: the number is taken again and its file overwritten."""
        connection = self.db.conn
        connection.execute("BEGIN IMMEDIATE")
        try:
            rows = connection.execute("SELECT MAX(version) FROM model_versions WHERE machine = ?", [machine])
            latest = rows.fetchone()[0]
            version = 1 if latest is None else int(latest) + 1
            row = write(version)
            if activate:
                connection.execute("UPDATE model_versions SET active = 0 WHERE machine = ?", [machine])
            self.db.table("model_versions").insert({**row, "machine": machine, "version": version})
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

    def active(self, machine: str) -> dict[str, Any] | None:
        rows = self.db.table("model_versions").rows_where("machine = ? AND active = 1", [machine], limit=1)
        return next(iter(rows), None)

    def all_active(self) -> list[dict[str, Any]]:
        return list(self.db.table("model_versions").rows_where("active = 1", order_by="machine"))

    def versions(self, machine: str | None = None) -> list[dict[str, Any]]:
        where = None if machine is None else "machine = ?"
        table = self.db.table("model_versions")
        return list(table.rows_where(where, [machine] if machine else [], order_by="machine, version"))


_ADVISED_COLUMNS: dict[str, Any] = {
    "job_id": int,
    "submitted_at": str,
    "user": str,
    "partition": str,
    "machine": str,
    "model_version": int,
    "confidence": str,
    "predicted_s": float,
    "predicted_p90_s": float,
    "time_limit_s": float,
    "slurm_start": str,
    "advisor_start": str,
    "state": str,
    "started_at": str,
    "elapsed_s": float,
    "ended_at": str,
}


class AdvisedJobs:
    """Each advised job's prediction, and later what Slurm's history says it really took."""

    def __init__(self, store: Store) -> None:
        self.db = store.db

    def record(self, row: dict[str, Any]) -> None:
        """Idempotent: a job id is one job, recorded once however often the wrapper retries."""
        with self.db.conn:
            self.db.table("advised_jobs").upsert(row, pk="job_id")

    def unfinished(self) -> list[dict[str, Any]]:
        return list(self.db.table("advised_jobs").rows_where("state IS NULL", order_by="job_id"))

    def finish(
        self, job_id: int, state: str, elapsed_s: float, ended_at: datetime, started_at: datetime | None
    ) -> None:
        row = {
            "state": state,
            "elapsed_s": elapsed_s,
            "ended_at": ended_at.isoformat(),
            "started_at": None if started_at is None else started_at.isoformat(),
        }
        with self.db.conn:
            self.db.table("advised_jobs").update(job_id, row)

    def finished(self) -> list[dict[str, Any]]:
        return list(self.db.table("advised_jobs").rows_where("state IS NOT NULL", order_by="job_id"))

    def of_user(self, user: str, limit: int) -> list[dict[str, Any]]:
        """The user's advised jobs, newest first."""
        rows = self.db.table("advised_jobs").rows_where(
            "user = ?", [user], order_by="job_id DESC", limit=limit
        )
        return list(rows)

    def wait_records(self) -> list[WaitRecord]:
        """Each estimator's predicted start of every advised job that started, beside the real start."""
        records = []
        for row in self.db.table("advised_jobs").rows_where("started_at IS NOT NULL"):
            for estimator in ("slurm", "advisor"):
                predicted = row[f"{estimator}_start"]
                if predicted:
                    records.append(
                        WaitRecord(
                            estimator=estimator,
                            partition=row["partition"],
                            predicted_start=datetime.fromisoformat(predicted),
                            actual_start=datetime.fromisoformat(row["started_at"]),
                        )
                    )
        return records


_AUDIT_COLUMNS: dict[str, Any] = {
    "request_id": str,
    "at": str,
    "uid": int,
    "user": str,
    "where": str,
    "argv": str,
    "request": str,
    "recommendation": str,
    "offered": int,
    "applied": int,
    "latency_ms": float,
    "job_id": int,
}


class Audit:
    """One row per advice request: who asked (by uid), what they asked, every candidate, the choice, whether
    a rewrite was offered, and once the wrapper reports the job it became, whether that job went in as
    advised (``applied``, from what was submitted, not from what was offered)."""

    def __init__(self, store: Store) -> None:
        self.db = store.db

    def record(self, row: dict[str, Any]) -> None:
        with self.db.conn:
            self.db.table("audit").insert(row)

    def get(self, request_id: str) -> dict[str, Any] | None:
        return next(iter(self.db.table("audit").rows_where("request_id = ?", [request_id])), None)

    def attach_job(self, request_id: str, job_id: int, applied: bool) -> None:
        with self.db.conn:
            self.db.table("audit").update(request_id, {"job_id": job_id, "applied": int(applied)})

    def purge(self, before: datetime) -> int:
        """Forgets every request older than ``before``; returns how many went."""
        with self.db.conn:
            cursor = self.db.execute("DELETE FROM audit WHERE at < ?", [before.isoformat()])
        return int(cursor.rowcount)

    def by_job(self, job_id: int) -> dict[str, Any] | None:
        rows = self.db.table("audit").rows_where("job_id = ?", [job_id], order_by="at desc", limit=1)
        return next(iter(rows), None)

    def offered(self) -> int:
        """Requests answered with a change to make (within the retention window, like every row)."""
        return self.db.table("audit").count_where("offered = 1")

    def applied(self) -> list[dict[str, Any]]:
        """The requests whose job went in as advised, oldest first."""
        return list(self.db.table("audit").rows_where("applied = 1 AND job_id IS NOT NULL", order_by="at"))
