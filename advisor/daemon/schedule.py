"""The daemon's background jobs, on an APScheduler 3 scheduler.

At the start, load the libraries layer tables are built with, so no request waits for them: torch and
torchvision, and those of ``hf:``/``timm:`` tables unless the settings' ``preload_model_libraries`` is false
(a site that runs neither keeps their memory).
Every few minutes read finished advised jobs from Slurm's history (calibration and the wait estimators'
track record); where the settings make the daemon the owner of retraining (``[models] retrain = "daemon"``),
every few minutes retrain the per-machine predictors when the benchmark database has new rows (the nightly
run adds them); where the policy enables it (``[first_sight]``), every few minutes submit a short benchmark
of each newly submitted architecture to the partitions that lack it.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

from advisor.settings.validated import Settings
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import SlurmError
from advisor.store import Store

if TYPE_CHECKING:
    from advisor.daemon.app import AdviceService

log = logging.getLogger("advisor.daemon")
OUTCOME_MINUTES = 5
RETRAIN_MINUTES = 10
HISTORY_MINUTES = 5
HISTORY_HOUR = 5
"""UTC: the history model is retrained after the night's benchmarks and before the day's first jobs."""
FIRST_SIGHT_MINUTES = 5


def start_jobs(
    advisor: AdviceService, client: SlurmClient, settings: Settings, database: Path, models_dir: Path
) -> BackgroundScheduler:
    """The models checked, then every background job scheduled and the scheduler started; the caller shuts
    it down."""
    from advisor.bench.first_sight import FirstSight
    from advisor.daemon.app import utc_now
    from advisor.history.service import MODEL_FILE

    history_model = models_dir / MODEL_FILE
    history_serves = _check_models(advisor)
    scheduler = BackgroundScheduler(timezone="UTC")
    # Once, now.
    scheduler.add_job(_load_libraries, "date", args=[settings.preload_model_libraries], id="model-libraries")
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
        results_dir=settings.bench_dir,
        site=settings.bench,
        clock=utc_now,
    )
    scheduler.add_job(first_sight, "interval", minutes=FIRST_SIGHT_MINUTES, id="first-sight")
    models = settings.models
    if models.retrain == "daemon":  # else the nightly timer retrains, and only it
        retrain = _Retrainer(database, models_dir, models.max_worse_mape)
        scheduler.add_job(retrain, "interval", minutes=RETRAIN_MINUTES, id="retrain")
    scheduler.start()
    return scheduler


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


def _load_libraries(model_libraries: bool) -> None:
    """What the daemon builds layer tables with, loaded in the background: the first job would otherwise
    wait for it, over ten seconds on a busy machine. torch and torchvision always (every table is built
    with torch, most by torchvision); transformers and timm (`load_libraries`) where the settings'
    ``preload_model_libraries`` says so, else with the first ``hf:``/``timm:`` job."""
    from advisor.introspect.builders import load_libraries

    started = time.monotonic()
    import torchvision  # noqa: F401  (torch with it; loaded for the requests to come)

    if not model_libraries:
        log.info(
            "torch and torchvision loaded (%.1f s); model libraries left to the first hf:/timm: job "
            "(preload_model_libraries = false)",
            time.monotonic() - started,
        )
        return
    loaded = load_libraries()
    took_s = time.monotonic() - started
    log.info("model libraries loaded: %s (%.1f s)", ", ".join(loaded) or "none installed", took_s)


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
