"""`advisor status` and `advisor explain JOBID`: what the service is doing and why a job was advised so.

`explain` asks the daemon, which answers only the job's owner (or root, or the service's own user);
`status` reads the daemon's health over its socket, the database the admin can read, and the queue.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from advisor import readable, terminal
from advisor.api import Explanation, Health
from advisor.daemon.transport import DaemonRefused, DaemonUnreachable, Service, call
from advisor.settings.validated import Settings
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import SlurmError

if TYPE_CHECKING:
    from advisor.store import ModelVersionRow, Store


class DaemonError(RuntimeError):
    """The daemon did not answer, or refused."""


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    status = commands.add_parser("status", help="daemon health, models, last benchmarks")
    status.add_argument("--db", type=Path, default=settings.database)
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=_status)
    explain = commands.add_parser("explain", help="the candidates and reasons behind an advised job")
    explain.add_argument("job_id", type=int)
    explain.add_argument("--json", action="store_true")
    explain.set_defaults(handler=_explain)


def ask(settings: Settings, path: str) -> bytes:
    """GET from the daemon: the cluster-wide service where the settings name one, else the socket."""
    service = Service(settings.socket, settings.service, settings.munge_socket)
    try:
        return call(service, "GET", path, None, settings.timeout_s)
    except (DaemonUnreachable, DaemonRefused) as error:
        raise DaemonError(str(error)) from error


def _explain(args: argparse.Namespace, console: Console) -> int:
    from advisor.recommend.cli import show

    try:
        explanation = Explanation.model_validate_json(ask(args.settings, f"/explain/{args.job_id}"))
    except DaemonError as error:
        console.print(f"advisor: error: {error}", highlight=False)
        return 1
    if args.json:
        print(explanation.model_dump_json(indent=2))
        return 0
    if explanation.applied:
        verdict = "submitted as advised"
    elif explanation.offered:
        verdict = "submitted as written (the advised changes were declined or refused)"
    else:
        verdict = "submitted as written (no change was offered)"
    console.print(f"job {explanation.job_id} of {explanation.user}: {verdict}", highlight=False)
    show(explanation.recommendation, console)
    return 0


def _status(args: argparse.Namespace, console: Console) -> int:
    try:
        health: Health | None = Health.model_validate_json(ask(args.settings, "/health"))
        problem = None
    except DaemonError as error:
        health, problem = None, str(error)
    store, database_error = _database(args.db)
    stored, queue = _stored(store), _queue(args.settings)
    report = {
        "daemon": None if health is None else health.model_dump(mode="json"),
        "daemon_error": problem,
        "database_error": database_error,
        **stored,
        "queue": queue,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if health is not None else 3
    _print_health(console, health, problem)
    if database_error is not None:
        console.print(f"database: {database_error}", highlight=False)
    for title, rows in stored.items():
        terminal.show(_table(title, rows, _STATUS_COLUMNS[title]), console)
    terminal.show(_table("queue", queue, {name: name for name in _QUEUE_COLUMNS}), console)
    return 0 if health is not None else 3


_STATUS_COLUMNS = {
    "models": {
        "name": "machine",
        "version": "version",
        "age_hours": "age",
        "heldout_mape": "held-out MAPE",
        "steps": "steps",
    },
    "benchmarks": {
        "partition": "partition",
        "name": "machine",
        "last": "last measured",
        "rows": "steps measured",
    },
}
"""Each table's fields, as its headers read."""
_QUEUE_COLUMNS = ("partition", "gpus_used", "gpus", "running", "pending")


def _stored(store: Store | None) -> dict[str, list[dict[str, Any]]]:
    """The active model versions and the benchmarks, each machine by its name and hash."""
    if store is None:
        return {"models": [], "benchmarks": []}
    from advisor.machines import machine_names

    names, now = machine_names(store.fingerprints()), datetime.now(UTC)
    models = [
        {
            "machine": row.machine,
            "name": names.get(row.machine),
            "version": row.version,
            "age_hours": round((now - row.created_at).total_seconds() / 3600, 1),
            "heldout_mape": row.heldout_mape,
            "steps": row.step_rows,
        }
        for row in _versions(store)
        if row.active
    ]
    benchmarks = [
        {**row.model_dump(), "last": row.last.isoformat(), "name": names.get(row.machine)}
        for row in store.benchmark_coverage()
    ]
    return {"models": models, "benchmarks": benchmarks}


def _queue(settings: Settings) -> list[dict[str, Any]]:
    try:
        from advisor.daemon.views import queue_summary

        client = SlurmClient.from_settings(settings.slurm)
        return [row.model_dump() for row in queue_summary(client.partitions(), client.jobs())]
    except (SlurmError, ModuleNotFoundError):  # a base install reads no queue; the daemon's health stays
        return []


def _print_health(console: Console, health: Health | None, problem: str | None) -> None:
    console.print(
        f"daemon: {'up, version ' + health.version if health else 'down: ' + str(problem)}", highlight=False
    )
    if health is None:
        return
    console.print(f"policy in force: {health.policy}", highlight=False)
    if health.policy_error:
        console.print(f"policy error: {health.policy_error}", highlight=False)
    for degraded in health.degraded:
        console.print(f"degraded: {degraded}", highlight=False)


def _table(title: str, rows: list[dict[str, Any]], columns: dict[str, str]) -> Table:
    """Rows of named fields, each read as its name says (`readable.field`); a machine by its name, its
    hash's start beside it."""
    table = Table(title=title, title_justify="left")
    if not rows:
        table.add_column("(none)")
        return table
    for header in columns.values():
        table.add_column(readable.header(header) if header in _QUEUE_COLUMNS else header)
    for row in rows:
        cells = {**row, "name": f"{row.get('name') or '-'} ({row.get('machine', '')[:8]})"}
        table.add_row(*(_cell(name, cells.get(name)) for name in columns))
    return table


def _cell(name: str, value: object) -> str:
    if name == "last" and isinstance(value, str):
        return readable.timestamp(value)
    if name in ("rows", "steps") and isinstance(value, int):
        return f"{value:,}"
    return readable.field(name, value)


def _database(path: Path) -> tuple[Store | None, str | None]:
    """The store, or why not: the daemon's health and the queue are still worth showing without it."""
    try:
        from advisor.store import NoDatabase, Store
    except ModuleNotFoundError as missing:  # a login node's base install
        return None, f"not read here: {missing.name} is not installed (the service's packages)"
    try:
        return Store.existing(path), None
    except NoDatabase as error:
        return None, str(error)


def _versions(store: Store) -> list[ModelVersionRow]:
    from advisor.store import ModelRegistry

    return ModelRegistry(store).versions()
