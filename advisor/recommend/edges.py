"""The recommender wired to the real world: Slurm for partitions, queue, history and ``--test-only``; the
store for predictors and the advisor's own predictions of jobs still running."""

from __future__ import annotations

import contextlib
import grp
import hashlib
import json
import os
import pwd
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from advisor.comm.rows import CommunicationRows
from advisor.comm.sync import DEFAULT_COMMUNICATION, Communication, Spread
from advisor.history.past import JobAsk
from advisor.history.service import RunHistory
from advisor.introspect import LayerTable
from advisor.introspect.table import TrainingSettings
from advisor.introspect.training import adapter_parameters, trainable_parameters
from advisor.jobscript.render import render_script
from advisor.jobscript.request import JobRequest
from advisor.jobscript.submission import ParsedSubmission
from advisor.policy.schema import Policy
from advisor.predict.registry import model_created_at
from advisor.predict.scaling import DeviceSpec
from advisor.predict.service import Predictors, StepQuestion, predict
from advisor.predict.types import Prediction
from advisor.recommend.ask import Ask, Caller, PastRuns
from advisor.recommend.choose import Recommendation
from advisor.recommend.cluster import ClusterView
from advisor.recommend.estimator import Context, StepPredictor, Sync
from advisor.recommend.placement import Standing, cpus_per_node
from advisor.recommend.screen import asked_partition
from advisor.recommend.service import recommend
from advisor.slurm.models import Partition
from advisor.store import AdvisedJobs, Store
from advisor.wait.accuracy import WaitEstimate
from advisor.wait.estimate import PLACEHOLDER_SCRIPT, QueueReading, estimate_waits
from advisor.wait.snapshot import SlotRequest


@dataclass(frozen=True)
class Sources:
    """Where a recommendation's inputs come from: Slurm (through the cluster view), the store, the policy,
    the GPU specifications. ``run_history``: the predictor of a job that describes no model, from its
    user's earlier runs; ``steps``: measured step times (an evaluation's) instead of the store's models."""

    cluster: ClusterView
    store: Store
    policy: Policy
    specs: list[DeviceSpec]
    run_history: RunHistory | None = None
    steps: StepPredictor | None = None


def recommend_now(
    sources: Sources,
    parsed: ParsedSubmission,
    table: LayerTable | None,
    user: str,
    now: datetime,
    unread: str | None = None,
) -> Recommendation:
    """``unread``: why a described model has no ``table`` (its job is then advised as one with none)."""
    cluster, request = sources.cluster, parsed.request
    partitions = cluster.partitions()
    context = Context(
        policy=sources.policy,
        partitions=partitions,
        waits=lambda queries: cluster.cached(
            _wait_key(request, queries),
            WAITS_FRESH_FOR,
            lambda: queue_waits(cluster, sources.store, request, queries, now, sources.run_history),
        ),
    )
    ask = _ask(sources, parsed, partitions, user, now, unread)
    return recommend(context, ask, _step_predictor(sources, table, partitions))


def _ask(
    sources: Sources,
    parsed: ParsedSubmission,
    partitions: list[Partition],
    user: str,
    now: datetime,
    unread: str | None,
) -> Ask:
    """The submission, its caller's standing with Slurm, and what their earlier runs say of it."""
    cluster, request = sources.cluster, parsed.request
    account = request.account or cluster.default_account(user)
    standing = Standing(
        groups=unix_groups(user), account=account, associations=tuple(cluster.associations(user))
    )
    history = None
    if sources.run_history is not None:
        job = history_ask(parsed, user, asked_partition(request, partitions), now)
        history = PastRuns(job, sources.run_history.forecast(cluster.history(), job))
    caller = Caller(user, account)
    return Ask(request, parsed.description, caller, now, standing, history, unread or parsed.undescribed)


def _step_predictor(
    sources: Sources, table: LayerTable | None, partitions: list[Partition]
) -> StepPredictor | None:
    """The given step times, else the store's models on the job's layer table; None without either."""
    if sources.steps is not None or table is None:
        return sources.steps
    cluster, store = sources.cluster, sources.store
    predictors = cluster.cached("predictors", PREDICTORS_FRESH_FOR, lambda: Predictors.load(store))
    names = [p.name for p in partitions]
    links = cluster.cached(
        "communication", PREDICTORS_FRESH_FOR, lambda: CommunicationRows(store).by_partition(names)
    )
    return StoredModels(store, predictors, sources.specs, table, partitions, links)


def history_ask(parsed: ParsedSubmission, user: str, partition: Partition | None, now: datetime) -> JobAsk:
    """The submission as accounting will record it: the limit Slurm gives it, its CPUs and GPUs in all."""
    request = parsed.request
    nodes = request.nodes_min or 1
    limit = request.time_limit or (partition.default_time or partition.max_time if partition else None)
    return JobAsk(
        user=user,
        script=parsed.job_name,
        partition=partition.name if partition else "",
        submit_s=now.timestamp(),
        limit_s=limit.total_seconds() if limit else None,
        cpus=cpus_per_node(request) * nodes,
        gpus=request.world_size if request.gpus else 0,
        nodes=nodes,
    )


def unix_groups(user: str) -> frozenset[str]:
    """The user's groups by name, as Slurm's AllowGroups sees them (the name comes from the kernel's uid)."""
    try:
        gids = os.getgrouplist(user, pwd.getpwnam(user).pw_gid)
    except KeyError:
        return frozenset()
    names = set()
    for gid in gids:
        with contextlib.suppress(KeyError):
            names.add(grp.getgrgid(gid).gr_name)
    return frozenset(names)


class StoredModels:
    """The daemon's `StepPredictor`: the store's per-machine models, applied to the job's layer table."""

    def __init__(
        self,
        store: Store,
        predictors: Predictors,
        specs: list[DeviceSpec],
        table: LayerTable,
        partitions: Sequence[Partition],
        communication: Mapping[str, Communication],
    ) -> None:
        self.store = store
        self.communication = communication
        self.predictors = predictors
        self.specs = specs
        self.table = table
        self.gpu_types = {p.name: p.gpu_type for p in partitions}
        self._training = table.training or TrainingSettings()
        self._stage = self._training.zero_stage or 0
        """ZeRO's stage: from 1 on a device holds its share of the state, so the device count matters."""
        self._steps: dict[tuple[str, int, bool, bool, int], Prediction] = {}

    def step(
        self, partition: str, gpus: int, nodes: int, micro_batch: int, amp: bool, channels_last: bool
    ) -> Prediction:
        """One device's step: data parallelism adds the all-reduce (`sync`), not device time; computed
        once per partition, micro-batch and settings, which many candidates share. The same whatever
        ``gpus`` and ``nodes``, but for ZeRO/FSDP's memory, sharded among all the job's devices (a node's,
        under FSDP's hybrid sharding)."""
        devices = self._training.shard_devices(gpus, nodes)
        key = (partition, micro_batch, amp, channels_last, devices)
        if key not in self._steps:
            question = StepQuestion(partition, self.table, micro_batch, amp, channels_last, devices)
            self._steps[key] = predict(self.predictors, question, self.specs, self.gpu_types.get(partition))
        return self._steps[key]

    def sync(self, partition: str, spread: Spread, micro_step_s: float) -> Sync:
        """The partition's measured all-reduce of the float32 gradients (AMP keeps them so) of the
        parameters the job trains (under LoRA, the adapters' alone) over ``spread``, less what the last
        backward hides (`advisor.comm.sync`); the stated default where the partition never measured.
        ZeRO-3 gathers every weight twice (forward, backward) and reduce-scatters the gradients: each
        moves half an all-reduce's bytes, so its traffic is the weights' bytes and half the gradients'.
        Stages 1 and 2 move an all-reduce's."""
        found = self.communication.get(partition, DEFAULT_COMMUNICATION)
        traffic = trainable_parameters(self.table) * 4
        if self._stage == 3:
            traffic = (self.table.totals.parameters + adapter_parameters(self.table)) * 4 + traffic // 2
        sync_s = found.sync_s(traffic, spread)
        return Sync(added_s=found.step_s(micro_step_s, sync_s) - micro_step_s, measured=found.measured)

    def trained_at(self, machine: str, version: int) -> datetime | None:
        return model_created_at(self.store, machine, version)


PREDICTORS_FRESH_FOR = timedelta(seconds=30)
"""A retrained model or new calibration serves within this long; meanwhile requests share one reading."""
WAITS_FRESH_FOR = timedelta(seconds=10)
"""A burst of identical submissions (an array of sweeps, a retry) sees one queue, not one each."""


def _wait_key(request: JobRequest, queries: Sequence[SlotRequest]) -> str:
    options = json.dumps(request.options, sort_keys=True)
    asked = json.dumps([query.model_dump(mode="json") for query in queries])
    return "waits:" + hashlib.sha256((options + asked).encode()).hexdigest()


def queue_waits(
    cluster: ClusterView,
    store: Store,
    request: JobRequest,
    queries: Sequence[SlotRequest],
    now: datetime,
    run_history: RunHistory | None = None,
) -> list[WaitEstimate]:
    """Slurm's ``--test-only`` start and the advisor's replay of the queue, for each query; the replay
    plans each queued job by the advisor's prediction where it advised it, else by its user's history
    (``run_history``), else by its limit scaled as similar jobs used theirs."""
    advised = AdvisedJobs(store)
    predicted = {row.job_id: row.predicted_s for row in advised.unfinished()}
    snapshot = cluster.snapshot(now)
    if run_history is not None:
        predicted = run_history.queue_runs(cluster.history(), snapshot) | predicted
    script = _directives(request)
    queue = QueueReading(
        snapshot, lambda candidate: cluster.start_estimate(candidate, script, request.account)
    )
    return estimate_waits(queries, now, predicted, cluster.history(), queue, advised.wait_records())


def _directives(request: JobRequest) -> str:
    """The script Slurm judges each candidate in: the user's other options (account, QOS...) as its
    directives; the candidate's resources, given after them, win."""
    try:
        return render_script(request)
    except ValueError:
        return PLACEHOLDER_SCRIPT
