"""Where a job may run at all, before anything is predicted: who may use a partition, and which of its nodes
can hold the job as the user wrote it. A candidate on a partition that fails here would be refused by
sbatch or pend for ever, so the advisor never offers one. Pure: Slurm's answers come in as data.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from advisor.jobscript.request import JobRequest
from advisor.slurm.models import Association, Partition
from advisor.slurm.values import expand_hostlist

_PLAIN_CONSTRAINT = re.compile(r"[A-Za-z0-9_.:=+-]+(?:[&,|][A-Za-z0-9_.:=+-]+)*")
"""Features joined by ``&`` (or ``,``) or by ``|``, not both: counts, brackets and parentheses are read by
Slurm alone, and a job that uses them stays on its partition."""


@dataclass(frozen=True)
class Standing:
    """What Slurm grants the caller: their Unix groups, the account the job is charged to, and their
    associations (empty where the cluster keeps no accounting: nothing to check them against)."""

    groups: frozenset[str]
    account: str | None
    associations: tuple[Association, ...] = ()


def refusal(partition: Partition, request: JobRequest, standing: Standing | None, asked: str) -> str | None:
    """Why the job cannot go to ``partition`` (the user asked for ``asked``), or None when it can."""
    if partition.name != asked:
        reservation = request.options.get("reservation")
        if reservation:
            return f"the job runs in reservation {reservation}: it stays on its partition"
        constraint = request.options.get("constraint")
        if constraint and _plain(constraint) is None:
            return f"--constraint={constraint} is Slurm's alone to read: the job stays on its partition"
    if standing is not None:
        reason = _access_refusal(partition, request, standing)
        if reason is not None:
            return reason
    return _nodes_refusal(partition, request)


def _access_refusal(partition: Partition, request: JobRequest, standing: Standing) -> str | None:
    access, account = partition.access, standing.account
    if account is not None:
        if access.allow_accounts is not None and account not in access.allow_accounts:
            return f"account {account} may not use it (AllowAccounts)"
        if access.deny_accounts is not None and account in access.deny_accounts:
            return f"account {account} may not use it (DenyAccounts)"
    if access.allow_groups is not None and not standing.groups & set(access.allow_groups):
        return "none of your groups may use it (AllowGroups)"
    association = None
    if standing.associations and account is not None:
        mine = [a for a in standing.associations if a.account == account]
        association = next((a for a in mine if a.partition == partition.name), None) or next(
            (a for a in mine if a.partition is None), None
        )
        if association is None:
            return f"you have no association with account {account} there"
    qos = request.qos or (association.default_qos if association is not None else None)
    if qos is not None:
        if association is not None and association.qos and qos not in association.qos:
            return f"QOS {qos} is not one of your association's"
        if access.allow_qos is not None and qos not in access.allow_qos:
            return f"QOS {qos} may not use it (AllowQos)"
        if access.deny_qos is not None and qos in access.deny_qos:
            return f"QOS {qos} may not use it (DenyQos)"
    return None


def _nodes_refusal(partition: Partition, request: JobRequest) -> str | None:
    named = expand_hostlist(request.options.get("nodelist") or "")
    missing = [name for name in named if name not in partition.node_names]
    if missing:
        return f"it lacks the nodes the job names: {', '.join(missing)}"
    excluded = set(expand_hostlist(request.options.get("exclude") or ""))
    cpus, memory_mb = cpus_per_node(request), memory_per_node_mb(request)
    constraint = _plain(request.options.get("constraint") or "")
    fitting = [
        node
        for node in partition.nodes
        if node.serves_jobs
        and node.name not in excluded
        and node.cpus >= cpus
        and node.memory_mb >= memory_mb
        and (constraint is None or constraint(set(node.features)))
    ]
    if fitting:
        return None
    wanted = [f"{cpus} CPUs", f"{memory_mb} MB of memory"]
    if constraint is not None:
        wanted.append(f"features {request.options.get('constraint')}")
    if excluded:
        wanted.append("not excluded")
    return f"no node in service there has {', '.join(wanted)}"


def cpus_per_node(request: JobRequest) -> int:
    """The CPUs a one-node job holds: tasks times CPUs per task."""
    return (request.cpus_per_task or 1) * (request.ntasks_per_node or request.ntasks or 1)


def memory_per_node_mb(request: JobRequest) -> int:
    """The memory a one-node job asks for, in whichever form it was written; 0 when it gives none."""
    if request.mem_mb is not None:
        return request.mem_mb
    if request.mem_per_cpu_mb is not None:
        return request.mem_per_cpu_mb * cpus_per_node(request)
    if request.mem_per_gpu_mb is not None and request.gpus is not None:
        return request.mem_per_gpu_mb * request.gpus.count
    return 0


def _plain(constraint: str) -> Callable[[set[str]], bool] | None:
    """A test of a node's features for a plain constraint; None for none, or for one Slurm alone reads."""
    if not constraint or not _PLAIN_CONSTRAINT.fullmatch(constraint):
        return None
    if "|" in constraint:
        if "&" in constraint or "," in constraint:
            return None
        anyof = set(constraint.split("|"))
        return lambda features: bool(anyof & features)
    allof = set(re.split(r"[&,]", constraint))
    return lambda features: allof <= features
