"""History at the daemon: the model a night trains from accounting, kept in a file of the models folder,
and each request's forecast from the caller's own finished jobs."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from advisor.history.features import History, past_rows
from advisor.history.jobs import JobAsk, from_accounting
from advisor.history.predictor import HistoryModel, RunForecast, predict_run, train_model
from advisor.slurm.models import FinishedJob

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

    def trained(self) -> Trained | None:
        try:
            stamp = self.path.stat().st_mtime
        except FileNotFoundError:
            return None
        with self._lock:
            if self._seen is None or self._seen[0] != stamp:
                self._seen = (stamp, load_model(self.path))
            return self._seen[1]

    def forecast(self, finished: Sequence[FinishedJob], ask: JobAsk) -> RunForecast:
        """``ask``'s run from the caller's jobs in ``finished`` that ended before it was submitted."""
        mine = [job for job in finished if job.user == ask.user]
        history = History()
        for past in sorted(from_accounting(mine), key=lambda past: past.end_s):
            if past.end_s <= ask.submit_s:
                history.ended(past)
        trained = self.trained()
        return predict_run(trained.model if trained else None, history, ask)
