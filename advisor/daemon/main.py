"""`advisor daemon`: the service, with its background jobs on an APScheduler 3 scheduler.

Background jobs: every few minutes read finished advised jobs from Slurm's history (calibration and the
wait estimators' track record); where the settings make the daemon the owner of retraining
(``[models] retrain = "daemon"``), every few minutes retrain the per-machine predictors when the benchmark
database has new rows (the nightly run adds them); where the policy enables it (``[first_sight]``), every
few minutes submit a short benchmark of each newly submitted architecture to the partitions that lack it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]
from rich.console import Console

from advisor.daemon.limits import Limits
from advisor.daemon.transport import UnsafeSocketDirectory
from advisor.jobscript.datasets import DatasetsFileError, load_datasets
from advisor.settings.validated import Settings
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import SlurmError, runner_for
from advisor.store import Store

if TYPE_CHECKING:
    from advisor.daemon.app import AdviceService

log = logging.getLogger("advisor.daemon")
OUTCOME_MINUTES = 5
_LIMIT_OPTIONS = (
    ("--max-connections", "connections", "N", "connections on the Unix socket in all"),
    (
        "--max-connections-per-user",
        "connections_per_uid",
        "N",
        "on the socket per uid; more are closed at once",
    ),
    (
        "--max-tcp-connections",
        "tcp_connections",
        "N",
        "connections on the TCP service in all, apart from the socket's",
    ),
    (
        "--max-tcp-connections-per-host",
        "tcp_connections_per_host",
        "N",
        "on the TCP service per client address",
    ),
    (
        "--max-unauthenticated",
        "tcp_unauthenticated",
        "N",
        "TCP connections that have not yet shown a valid MUNGE credential, in all",
    ),
    (
        "--connection-deadline",
        "deadline_s",
        "SECONDS",
        "every connection is closed this long after it opened",
    ),
    ("--workers", "workers", "N", "threads that compute advice; fresh answers need none"),
    (
        "--body-memory",
        "body_memory_mib",
        "MIB",
        "request bodies being read at once, reserved from their Content-Length; more get a 503",
    ),
    ("--body-memory-per-user", "body_memory_per_caller_mib", "MIB", "the same per caller (uid)"),
)
RETRAIN_MINUTES = 10
HISTORY_MINUTES = 5
HISTORY_HOUR = 5
"""UTC: the history model is retrained after the night's benchmarks and before the day's first jobs."""
FIRST_SIGHT_MINUTES = 5


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    daemon = commands.add_parser(
        "daemon", help="serve advice on a Unix socket (run as the advisor's own user)"
    )
    daemon.add_argument("--socket", type=Path, default=settings.socket, help="default: %(default)s")
    daemon.add_argument("--db", type=Path, default=settings.database, help="default: %(default)s")
    daemon.add_argument("--policy", type=Path, default=settings.policy, help="default: %(default)s")
    daemon.add_argument("--gpu-specs", type=Path, default=settings.gpu_specs, help="default: %(default)s")
    daemon.add_argument("--models-dir", type=Path, default=settings.models_dir, help="default: %(default)s")
    daemon.add_argument("--log-level", default="INFO")
    daemon.add_argument(
        "--step-times",
        type=Path,
        metavar="FILE",
        help="an evaluation's step times (JSON, `advisor.daemon.step_times`): jobs of the models it names "
        "are predicted from it instead of the stored models (benchmarks/replay.py starts the daemon so)",
    )
    limits = daemon.add_argument_group("limits (what callers may hold of the daemon)")
    for flag, field, metavar, meaning in _LIMIT_OPTIONS:
        default = getattr(Limits(), field)
        kind = type(default)
        limits.add_argument(
            flag,
            dest=field,
            type=kind,
            default=default,
            metavar=metavar,
            help=f"{meaning} (default: %(default)s)",
        )
    daemon.set_defaults(handler=_daemon)


def _daemon(args: argparse.Namespace, console: Console) -> int:
    if os.geteuid() == 0 and not args.settings.allow_root:
        console.print(
            "advisor: error: the daemon never runs as root; run it as the advisor user", highlight=False
        )
        return 1
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # The service needs torch (introspection) and xgboost (predictors); other commands start without them.
    from advisor.bench.first_sight import FirstSight
    from advisor.daemon.app import AdviceService, ServiceInputs, utc_now
    from advisor.daemon.metrics import CountingRunner, Metrics
    from advisor.daemon.server import Listen, serve
    from advisor.daemon.step_times import StepTimesError, load_step_times
    from advisor.history.service import MODEL_FILE
    from advisor.predict.service import load_specs

    specs = load_specs(args.gpu_specs) if args.gpu_specs.is_dir() else []
    try:
        datasets = load_datasets(args.settings.datasets)
        step_times = None if args.step_times is None else load_step_times(args.step_times)
    except (DatasetsFileError, StepTimesError) as error:
        console.print(f"advisor: error: {error}", highlight=False)
        return 1
    history_model = args.models_dir / MODEL_FILE
    inputs = ServiceInputs(
        database=args.db,
        policy=args.policy,
        specs=specs,
        datasets=datasets,
        history_model=history_model,
        admins=frozenset(args.settings.admins),
        bench=args.settings.bench,
        step_times=step_times,
    )
    metrics, slurm = Metrics(), args.settings.slurm
    runner = CountingRunner(runner_for(slurm), metrics)
    client = SlurmClient(runner, timeout_s=slurm.timeout_s)
    advisor = AdviceService(inputs, client, utc_now, metrics, runner.failure_since)
    metrics.watch_models(advisor.store, utc_now)
    if advisor.policy.last_error is not None:
        log.error("policy not loaded, the built-in default is in force: %s", advisor.policy.last_error)
    history_serves = _check_models(advisor)
    scheduler = BackgroundScheduler(timezone="UTC")
    scheduler.add_job(_collect, "interval", minutes=OUTCOME_MINUTES, args=[advisor], id="outcomes")
    scheduler.add_job(_purge, "interval", hours=1, args=[advisor], id="audit-retention")
    # Accounting history for the queue replay, read here and never in a request (sacct is slow on a big
    # cluster); the first read happens at once.
    scheduler.add_job(
        _refresh_history,
        "interval",
        minutes=HISTORY_MINUTES,
        args=[advisor],
        id="history",
        next_run_time=utc_now(),
    )
    # The history model: every night from accounting, and at once where none serves (no night has made one
    # yet, its file was quarantined, or it was written before checksums).
    at_once = {} if history_serves else {"next_run_time": utc_now()}
    scheduler.add_job(
        _train_history,
        "cron",
        hour=HISTORY_HOUR,
        args=[advisor, history_model],
        id="history-model",
        **at_once,
    )
    first_sight = FirstSight(
        client=client,
        store=advisor.store,
        rules=lambda: advisor.policy.current.first_sight,
        python=sys.executable,
        results_dir=args.settings.bench_dir,
        site=args.settings.bench,
        clock=utc_now,
    )
    scheduler.add_job(first_sight, "interval", minutes=FIRST_SIGHT_MINUTES, id="first-sight")
    models = args.settings.models
    if models.retrain == "daemon":  # else the nightly timer retrains, and only it
        retrain = _Retrainer(args.db, args.models_dir, models.max_worse_mape)
        scheduler.add_job(retrain, "interval", minutes=RETRAIN_MINUTES, id="retrain")
    scheduler.start()
    try:
        limits = Limits(**{field: getattr(args, field) for _, field, _, _ in _LIMIT_OPTIONS})
        settings = args.settings
        listen = Listen(
            service=settings.service_listen,
            munge_socket=settings.munge_socket,
            metrics=settings.metrics_listen,
        )
        serve(advisor, args.socket, limits, listen)
    except (UnsafeSocketDirectory, OSError) as error:
        console.print(f"advisor: error: cannot listen on {args.socket}: {error}", highlight=False)
        return 1
    finally:
        scheduler.shutdown(wait=False)
    return 0


def _check_models(advisor: AdviceService) -> bool:
    """Every active predictor file and the history model checked before the first request is served, not
    at the first /advise: a corrupted one is quarantined now, so the log names it at the start and /health
    from its first answer. True where the history model serves."""
    from advisor.predict.registry import active_models

    try:
        with advisor.store() as store:
            serving = active_models(store)
    except sqlite3.Error as error:
        log.error("predictor files not checked at the start: %s", error)
    else:
        log.info("predictor files checked: %d machines served (%s)", len(serving), ", ".join(sorted(serving)))
    return advisor.run_history is not None and advisor.run_history.trained() is not None


def _refresh_history(advisor: AdviceService) -> None:
    try:
        advisor.cluster.refresh_history()
    except SlurmError as error:
        log.warning("accounting history not read: %s", error)


def _train_history(advisor: AdviceService, path: Path) -> None:
    from advisor.history.service import TRAINING_SPAN, save_model, train_from_accounting

    now = advisor.clock()
    try:
        finished = advisor.client.history(now - TRAINING_SPAN)
    except SlurmError as error:
        log.warning("history model not trained: accounting not read: %s", error)
        return
    model = train_from_accounting(finished, now)
    if model is None:
        log.info("history model not trained: %d jobs in accounting are too few", len(finished))
        return
    save_model(path, model, now)
    log.info("history model trained on %d jobs", model.jobs)


def _purge(advisor: AdviceService) -> None:
    forgotten = advisor.purge_audit()
    if forgotten:
        log.info("forgot %d audited requests past the retention", forgotten)


def _collect(advisor: AdviceService) -> None:
    from advisor.predict.outcomes import collect_outcomes

    with advisor.store() as store:
        finished = collect_outcomes(store, advisor.client)
    if finished:
        log.info("%d advised jobs finished", finished)


class _Retrainer:
    """Retrains when the benchmark tables grew since the last look; the first look only takes note."""

    def __init__(self, database: Path, models_dir: Path, max_worse_mape: float | None) -> None:
        self.database = database
        self.models_dir = models_dir
        self.max_worse_mape = max_worse_mape
        self.seen: int | None = None

    def __call__(self) -> None:
        from advisor.predict.retrain import retrain_all

        store = Store.open(self.database)
        rows = store.count()
        if self.seen is not None and rows > self.seen:
            for outcome in retrain_all(store, self.models_dir, self.max_worse_mape):
                if outcome.trained is None:
                    log.warning("%s", outcome.error)
                    continue
                verb = "activated" if outcome.trained.activated else "held back by the quality gate"
                log.info("retrained %s: version %d, %s", outcome.machine, outcome.trained.version, verb)
        self.seen = rows
