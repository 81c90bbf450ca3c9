"""History at the daemon: the model a night trains from accounting, kept in a file of the models folder,
and each request's forecast from the caller's own finished jobs."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import xgboost as xgb

from advisor.history.features import History, past_rows
from advisor.history.jobs import JobAsk, from_accounting
from advisor.history.predictor import HistoryModel, RunForecast, forecast, look_back, predict_run, train_model
from advisor.slurm.models import FinishedJob
from advisor.wait.snapshot import PendingJob, QueueSnapshot, RunningJob

log = logging.getLogger(__name__)
MODEL_FILE = "history-model.json"
TRAINING_SPAN = timedelta(days=90)
"""How far back a night's training reads accounting."""


@dataclass(frozen=True)
class Trained:
    model: HistoryModel
    trained_at: datetime


def train_from_accounting(finished: Sequence[FinishedJob], now: datetime) -> HistoryModel | None:
    """A model of everything ``finished`` says, each job seen with the past it had at its submission."""
    rows, ended = past_rows(from_accounting(finished), now.timestamp())
    return train_model(rows, ended)


def save_model(path: Path, model: HistoryModel, trained_at: datetime) -> None:
    """Written whole or not at all: a crash mid-write leaves the previous night's model."""
    record = {
        "trained_at": trained_at.isoformat(),
        "jobs": model.jobs,
        "booster": json.loads(model.to_json()),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(record), encoding="utf-8")
    partial.replace(path)


def load_model(path: Path) -> Trained | None:
    """None where no night has trained one yet; a file that does not read is an error."""
    if not path.exists():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    model = HistoryModel.from_json(json.dumps(record["booster"]).encode(), int(record["jobs"]))
    return Trained(model, datetime.fromisoformat(record["trained_at"]))


class RunHistory:
    """The daemon's history predictor: the night's model (reread when the file changes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[float, Trained | None] | None = None
        self._everyone_of: tuple[tuple[int, int], History] | None = None

    def trained(self) -> Trained | None:
        try:
            stamp = self.path.stat().st_mtime
        except FileNotFoundError:
            return None
        with self._lock:
            if self._seen is None or self._seen[0] != stamp:
                try:
                    loaded = load_model(self.path)
                except (OSError, ValueError, KeyError, xgb.core.XGBoostError) as error:
                    log.error("history model %s not used, Tsafrir's rule serves: %s", self.path, error)
                    loaded = None
                self._seen = (stamp, loaded)
            return self._seen[1]

    def forecast(self, finished: Sequence[FinishedJob], ask: JobAsk) -> RunForecast:
        """``ask``'s run, asked now, from ``finished`` (all of it ended before now)."""
        trained = self.trained()
        return predict_run(trained.model if trained else None, self._everyone(finished), ask)

    def queue_runs(self, finished: Sequence[FinishedJob], snapshot: QueueSnapshot) -> dict[int, float]:
        """Each queued job's run (seconds, start to end) where its user's history says something: what
        the queue replay plans the jobs the advisor did not advise with, instead of their limits."""
        now = snapshot.taken_at.timestamp()
        asks = {job.job_id: _running_ask(job, now) for job in snapshot.running}
        asks |= {job.job_id: _pending_ask(job, now) for job in snapshot.pending}
        history = self._everyone(finished)
        trained = self.trained()
        ids = list(asks)
        rows = [history.features(asks[job_id]) for job_id in ids]
        quantiles = trained.model.quantiles(rows) if trained and rows else None
        runs: dict[int, float] = {}
        for position, job_id in enumerate(ids):
            pair = (
                None if quantiles is None else (float(quantiles[position][0]), float(quantiles[position][1]))
            )
            told = forecast(look_back(history, asks[job_id]), asks[job_id], pair)
            if told.source in ("model", "history") and told.p50_s is not None:
                runs[job_id] = told.p50_s
        return runs

    def _everyone(self, finished: Sequence[FinishedJob]) -> History:
        """Everyone's ended jobs, built once per reading of accounting (the cluster view keeps one)."""
        key = (id(finished), len(finished))
        with self._lock:
            if self._everyone_of is None or self._everyone_of[0] != key:
                history = History()
                for past in sorted(from_accounting(finished), key=lambda past: past.end_s):
                    history.ended(past)
                self._everyone_of = (key, history)
            return self._everyone_of[1]


def _running_ask(job: RunningJob, now: float) -> JobAsk:
    limit = job.time_limit.total_seconds() if job.time_limit else None
    cpus, gpus = (sum(getattr(held, part) for held in job.allocations) for part in ("cpus", "gpus"))
    nodes = max(len(job.allocations), 1)
    return JobAsk(job.user, "", job.partition, now, limit, max(cpus, 1), gpus, nodes)


def _pending_ask(job: PendingJob, now: float) -> JobAsk:
    request = job.request
    limit = request.time_limit.total_seconds() if request.time_limit else None
    cpus, gpus = request.cpus_per_node * request.nodes, request.gpus_per_node * request.nodes
    return JobAsk(job.user, "", request.partitions[0], now, limit, cpus, gpus, request.nodes)
