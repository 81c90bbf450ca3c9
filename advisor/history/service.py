"""History at the daemon: the model a night trains from accounting, kept in a file of the models folder,
and each request's forecast from the caller's own finished jobs.

The file carries the sha256 of the booster bytes it hands xgboost, whose native parser can crash its
process on a corrupted booster instead of raising: a file whose booster differs never reaches it, and is
quarantined (`advisor.predict.model_files`), and Tsafrir's rule serves until a new model is trained. A file
written before checksums is not loaded at all: the daemon retrains at once where it finds one.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import xgboost as xgb

from advisor.history.features import History, past_rows
from advisor.history.jobs import from_accounting
from advisor.history.past import JobAsk
from advisor.history.predictor import HistoryModel, RunForecast, forecast, look_back, predict_run, train_model
from advisor.predict.model_files import ModelFileError, digest, move_aside, write_version_file
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
    """Written whole or not at all (a crash mid-write leaves the previous night's model), with the digest of
    the booster bytes `load_model` will hand xgboost."""
    booster = json.loads(model.to_json())
    record = {
        "trained_at": trained_at.isoformat(),
        "jobs": model.jobs,
        "sha256": digest(_booster_bytes(booster)),
        "booster": booster,
    }
    write_version_file(path, json.dumps(record))


class NoChecksumError(Exception):
    """A history model written before checksums: not loaded (nothing says it is whole), but no fault found."""


def load_model(path: Path) -> Trained | None:
    """None where no night has trained one yet. `ModelFileError`: a file xgboost must not see;
    `NoChecksumError`: one with nothing to check it by."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ModelFileError(f"could not be read ({error.strerror or type(error).__name__})") from None
    try:
        record = json.loads(data)
        booster = _booster_bytes(record["booster"])
        expected = record.get("sha256")
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        raise ModelFileError("is not a history model this advisor reads") from None
    if expected is None:
        raise NoChecksumError("written before checksums were kept")
    if digest(booster) != expected:
        raise ModelFileError("failed its checksum")
    try:
        model = HistoryModel.from_json(booster, int(record["jobs"]))
        return Trained(model, datetime.fromisoformat(record["trained_at"]))
    except (ValueError, TypeError, KeyError, xgb.core.XGBoostError):
        raise ModelFileError("matches its checksum but is not a history model this advisor reads") from None


def _booster_bytes(booster: Any) -> bytes:
    """The very bytes xgboost parses, so the digest covers what it sees (json.dumps of what json.loads read
    is the same text however often it is done)."""
    return json.dumps(booster).encode()


class RunHistory:
    """The daemon's history predictor: the night's model (reread when the file changes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problem: str | None = None
        """Why the model file serves no more (quarantined), as ``/health`` says it; None while it serves."""
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
                self._seen = (stamp, self._load())
            return self._seen[1]

    def _load(self) -> Trained | None:
        try:
            loaded = load_model(self.path)
        except NoChecksumError as error:
            log.warning(
                "history model %s not used, Tsafrir's rule serves: %s; the daemon retrains it at its start "
                "(or `advisor history train`)",
                self.path,
                error,
            )
            return None
        except ModelFileError as error:
            where = move_aside(self.path)
            log.error(
                "history model %s %s: quarantined, %s; Tsafrir's rule serves until a new one is trained "
                "(nightly, at the daemon's start, or `advisor history train`)",
                self.path,
                error,
                where,
            )
            self.problem = (
                f"the history model {self.path.name} {error}: quarantined; history advice uses Tsafrir's "
                "rule until a new one is trained (tonight, or `advisor history train`)"
            )
            return None
        self.problem = None
        return loaded

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
