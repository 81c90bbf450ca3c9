"""What the daemon does for each request, apart from HTTP: parse, predict, recommend, audit.

The caller is a `Peer` from the kernel. The daemon never runs sbatch for anyone: it answers with the
submission to make, and the caller's own `advise-submit` makes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from advisor import __version__
from advisor.api import (
    AdviseRequest,
    AdviseResponse,
    Explanation,
    Health,
    MyJobs,
    NightPlan,
    Overview,
    Submitted,
)
from advisor.bench.architectures import Architectures
from advisor.daemon import views
from advisor.daemon.links import Forbidden, JobLinks, user_name
from advisor.daemon.metrics import Metrics
from advisor.daemon.step_times import MeasuredSteps, StepTimes
from advisor.daemon.transport import Peer
from advisor.factory_table import daemon_table, not_built_here
from advisor.history.service import RunHistory
from advisor.introspect import LayerTable
from advisor.jobscript.commands import CommandReading
from advisor.jobscript.datasets import Dataset, shipped_datasets
from advisor.jobscript.lexer import STDIN
from advisor.jobscript.rewrite import AdviceError, Submission, apply_advice, unchanged
from advisor.jobscript.submission import ParsedSubmission, parse_job, sent_files
from advisor.policy.holder import PolicyHolder
from advisor.predict.scaling import DeviceSpec
from advisor.recommend.choose import Recommendation
from advisor.recommend.cluster import ClusterView
from advisor.recommend.edges import WAITS_FRESH_FOR, Sources, recommend_now
from advisor.settings.validated import BenchSettings
from advisor.slurm.client import SlurmClient
from advisor.store import Audit, AuditRow, ModelRegistry, Store

MAX_IDLE_STORES = 8
"""SQLite connections kept open between requests: as many as the server's threads that advise."""


@dataclass(frozen=True)
class ServiceInputs:
    database: Path
    policy: Path
    specs: list[DeviceSpec]
    datasets: Mapping[str, Dataset] = field(default_factory=shipped_datasets)
    history_model: Path | None = None
    """The file the night's history model is kept in (`advisor.history.service`); None: Tsafrir's rule."""
    admins: frozenset[str] = frozenset()
    """User names and uids (as text) who may read the admin view (``admins`` in the settings)."""
    bench: BenchSettings = field(default_factory=BenchSettings)
    """For tonight's benchmark plans in the admin view, as the nightly job makes them."""
    step_times: StepTimes | None = None
    """Step times given for some models (``--step-times``, an evaluation's: `advisor.daemon.step_times`): a
    job naming one of them is predicted from them, not from the stored models and a layer table."""


SLURM_DOWN_FOR_S = 120.0
"""A Slurm command that never answered within this long ago makes /health say Slurm is unreachable."""


@dataclass(frozen=True)
class _Answer:
    recommendation: Recommendation
    submission: Submission
    request_json: str
    recommendation_json: str
    """Serialised once for the audit: a burst of identical requests shares it."""
    table: LayerTable | None = None
    global_batch: int | None = None
    """The architecture and batch the job trains with, for tonight's benchmarks (`Architectures`)."""


class AdviceService:
    def __init__(
        self,
        inputs: ServiceInputs,
        client: SlurmClient,
        clock: Callable[[], datetime],
        metrics: Metrics | None = None,
        slurm_failure: Callable[[float], str | None] = lambda _seconds: None,
    ) -> None:
        """``slurm_failure(seconds)``: the last Slurm command that never answered within that long, if any."""
        self.inputs = inputs
        self.client = client
        self.metrics = metrics or Metrics()
        self.slurm_failure = slurm_failure
        self.cluster = ClusterView(client, clock)
        self.tonight = views.TonightPlans(self.cluster, self._nights)
        self.links = JobLinks(client, clock, self.metrics)
        self.clock = clock
        self.policy = PolicyHolder(inputs.policy)
        self.run_history = RunHistory(inputs.history_model) if inputs.history_model else None
        self._stores: queue.SimpleQueue[Store] = queue.SimpleQueue()
        self._writing = threading.Lock()

    @contextmanager
    def store(self) -> Iterator[Store]:
        """A pooled SQLite connection, used by one thread at a time: the server answers each request on a
        thread of its own, and opening a connection (with its schema check) costs more than the answer."""
        try:
            store = self._stores.get_nowait()
        except queue.Empty:
            store = Store.open(self.inputs.database, any_thread=True)
        try:
            yield store
        finally:
            if self._stores.qsize() < MAX_IDLE_STORES:
                self._stores.put(store)
            else:  # a burst is over: the pool shrinks back
                store.db.conn.close()

    def health(self) -> Health:
        error = self.policy.last_error
        return Health(
            ok=True,
            version=__version__,
            policy=self.policy.source or "built-in default",
            policy_error=None if error is None else str(error),
            degraded=self._degraded(),
        )

    def _degraded(self) -> list[str]:
        problems = []
        if self.policy.last_error is not None:
            problems.append("policy: the last edit did not load; the one before stays in force")
        try:
            with self.store() as store:
                active = ModelRegistry(store).all_active()
        except sqlite3.Error as error:
            problems.append(f"database: {error}")
            active = []
        else:
            if not active:
                problems.append("no predictors: benchmark the partitions, then `advisor models train`")
        young = timedelta(days=self.policy.current.rewrite.max_model_age_days)
        now = self.clock()
        for row in active:
            age = now - row.created_at
            if row.quarantined is not None:
                problems.append(
                    f"the predictor of {row.machine} (version {row.version}) {row.quarantined}: "
                    "quarantined; its partitions get no model advice of their own (scaled from another "
                    "machine, low confidence) until `advisor models train`"
                )
            elif age > young:
                problems.append(
                    f"the predictor of {row.machine} is {age.days} days old: its advice is shown, never "
                    "applied"
                )
        if self.run_history is not None and self.run_history.problem is not None:
            problems.append(self.run_history.problem)
        failure = self.slurm_failure(SLURM_DOWN_FOR_S)
        if failure is not None:
            problems.append(_slurm_down(failure))
        return problems

    def advise(self, peer: Peer, request: AdviseRequest) -> AdviseResponse:
        """The same request from the same caller under the same policy gets the same answer while the queue
        waits it rests on are fresh; each request is still audited on its own."""
        began, now, user = time.perf_counter(), self.clock(), user_name(peer.uid)
        key = self._key(peer, request)
        answer = self.cluster.cached(key, WAITS_FRESH_FOR, lambda: self._answer(request, user, now))
        return self._audited(peer, request, answer, user, now, began)

    def advise_if_ready(self, peer: Peer, request: AdviseRequest) -> AdviseResponse | None:
        """The answer when an identical request's is still fresh, else None: what the server can give without
        waiting on Slurm (an audit row is all it writes)."""
        began, now = time.perf_counter(), self.clock()
        answer = self.cluster.peek(self._key(peer, request), WAITS_FRESH_FOR)
        if not isinstance(answer, _Answer):
            return None
        return self._audited(peer, request, answer, user_name(peer.uid), now, began)

    def _key(self, peer: Peer, request: AdviseRequest) -> str:
        return f"advice:{peer.uid}:{self.policy.generation}:{_digest(request)}"

    def _audited(
        self, peer: Peer, request: AdviseRequest, answer: _Answer, user: str, now: datetime, began: float
    ) -> AdviseResponse:
        """Audited unless the policy turns the advisor off for the caller, or the request is a preview: then
        nothing of the submission is kept, and the empty request id says there is no record to link to."""
        latency_ms = (time.perf_counter() - began) * 1000
        if answer.recommendation.mode == "off" or request.preview:
            return AdviseResponse(
                request_id="",
                recommendation=answer.recommendation,
                submission=answer.submission,
                latency_ms=latency_ms,
            )
        request_id = uuid.uuid4().hex
        row = AuditRow(
            request_id=request_id,
            at=now,
            uid=peer.uid,
            user=user,
            where=request.where,
            argv=json.dumps(request.sbatch_argv),
            request=answer.request_json,
            recommendation=answer.recommendation_json,
            offered=answer.submission.rewritten,
            latency_ms=latency_ms,
            architecture_hash=None if answer.table is None else answer.table.architecture_hash,
        )
        # One writer at a time in this process: SQLite's own busy wait sleeps in steps of milliseconds.
        with self._writing, self.store() as store:
            Audit(store).record(row)
            if answer.table is not None and answer.global_batch is not None:
                Architectures(store).record(answer.table, now, batch=answer.global_batch)
        return AdviseResponse(
            request_id=request_id,
            recommendation=answer.recommendation,
            submission=answer.submission,
            latency_ms=latency_ms,
        )

    def _answer(self, request: AdviseRequest, user: str, now: datetime) -> _Answer:
        parsed = parse_job(
            request.script,
            request.where,
            request.sbatch_argv,
            request.environ,
            request.description_args,
            CommandReading(
                self.inputs.datasets, None if request.files is None else sent_files(request.files)
            ),
        )
        steps = self._given_steps(parsed)
        table = None if steps is not None else _table(parsed, request)
        unread = None if steps is not None else _unread(parsed, table)
        with self.store() as store:
            sources = Sources(
                self.cluster, store, self.policy.current, self.inputs.specs, self.run_history, steps
            )
            recommendation = recommend_now(sources, parsed, table, user, now, unread)
        return _Answer(
            recommendation=recommendation,
            submission=_submission(parsed, request, recommendation),
            request_json=parsed.request.model_dump_json(exclude={"script"}),
            recommendation_json=recommendation.model_dump_json(),
            table=table,
            global_batch=None if parsed.description is None else parsed.description.global_batch,
        )

    def _given_steps(self, parsed: ParsedSubmission) -> MeasuredSteps | None:
        """The given step times of the job's model, where the daemon was started with some for it."""
        times, description = self.inputs.step_times, parsed.description
        if times is None or description is None or description.model not in times.models():
            return None
        return MeasuredSteps(times, description.model, self.cluster.partitions())

    def purge_audit(self) -> int:
        """Forgets requests older than the policy's ``[audit] retention_days``; returns how many went."""
        days = self.policy.current.audit.retention_days
        with self._writing, self.store() as store:
            return Audit(store).purge(self.clock() - timedelta(days=days))

    def submitted(self, peer: Peer, message: Submitted) -> Health:
        """Links the job to its advice once Slurm confirms the job is the caller's (`JobLinks`)."""
        with self.store() as store:
            self.links.link(store, peer, message)
        return self.health()

    def my_jobs(self, peer: Peer) -> MyJobs:
        """The caller's own advised jobs, by the kernel's uid: nobody sees another user's."""
        with self.store() as store:
            return views.my_jobs(store, user_name(peer.uid))

    def overview(self, peer: Peer) -> Overview:
        """Every user's jobs in sum, so only for the admins the settings name: root is not one by right."""
        user = user_name(peer.uid)
        if not {user, str(peer.uid)} & self.inputs.admins:
            raise Forbidden(f"{user} is not one of the advisor's admins (`admins` in its settings)")
        with self.store() as store:
            return views.overview(store, self.cluster, self.tonight.ready(), self.clock())

    def _nights(self) -> list[NightPlan]:
        with self.store() as store:
            return views.nights(store, self.cluster.partitions(), self.inputs.bench, self.clock())

    def explain(self, peer: Peer, job_id: int) -> Explanation:
        with self.store() as store:
            row = Audit(store).by_job(job_id)
        # One answer for "none" and "not yours": which job ids were advised is no one else's business.
        if row is None or peer.uid not in (row.uid, 0, os.geteuid()):
            raise LookupError(f"no advice of yours was given for job {job_id}")
        return Explanation(
            job_id=job_id,
            request_id=row.request_id,
            user=row.user,
            offered=bool(row.offered if row.offered is not None else row.applied),
            applied=bool(row.applied),
            recommendation=Recommendation.model_validate_json(row.recommendation),
        )


def _slurm_down(failure: str) -> str:
    """The command's name only: ``/health`` answers anyone (on the metrics port too), and a command's
    arguments name users, their jobs and paths (the admins' overview shows the whole command)."""
    command = failure.split(":", 1)[0]
    named = command if re.fullmatch(r"[\w.+-]{1,40}", command) else "a Slurm command"
    return f"Slurm did not answer: {named} did not complete (it timed out or could not run)"


def _digest(request: AdviseRequest) -> str:
    return hashlib.sha256(request.model_dump_json().encode()).hexdigest()


def _table(parsed: ParsedSubmission, request: AdviseRequest) -> LayerTable | None:
    """The job's layer table: the one sent (a factory's, a user's folder's: built in their process), else
    one built here from library code (`daemon_table`); None without either (`_unread`)."""
    if parsed.description is None:
        return None
    return daemon_table(parsed.description, request.table)


def _unread(parsed: ParsedSubmission, table: LayerTable | None) -> str | None:
    """Why a described model gets no model advice: a factory or a user's folder came without its table
    (plain sbatch through the cli_filter runs no user code), so the job is advised from its history."""
    if parsed.description is None or table is not None:
        return None
    why = not_built_here(parsed.description.model)
    return f"{why}: advice from the job's history only (advise-submit advises on the model)"


def _submission(
    parsed: ParsedSubmission, request: AdviseRequest, recommendation: Recommendation
) -> Submission:
    stdin = parsed.request.script if request.where == STDIN else None
    if not recommendation.apply or recommendation.advice is None:
        return unchanged(request.sbatch_argv, stdin)
    try:
        return apply_advice(
            parsed.request,
            parsed.description,
            request.sbatch_argv,
            recommendation.advice,
            {estimate.candidate.partition for estimate in recommendation.candidates},
        )
    except AdviceError as error:
        return unchanged(request.sbatch_argv, stdin, f"advice not applied: {error}")


def utc_now() -> datetime:
    return datetime.now(UTC)
