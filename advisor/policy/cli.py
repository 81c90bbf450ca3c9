"""`advisor policy check FILE`: an admin validates an edit before the service picks it up."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor.policy.load import PolicyError, load_policy
from advisor.policy.partitions import partition_warnings
from advisor.policy.schema import Policy
from advisor.settings.validated import Settings, SlurmSettings

INVALID = 2
CHECK_TIMEOUT_S = 10.0
"""A Slurm that answers does so in a second; one that does not (scontrol retries a dead controller for a
minute) must not hold an admin's check, or a script's, for long."""


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    policy = commands.add_parser("policy", help="admin policies: which partitions, objectives and limits")
    actions = policy.add_subparsers(required=True, metavar="ACTION")
    check = actions.add_parser("check", help="validate a policy file; errors name their line")
    check.add_argument("file", type=Path)
    check.add_argument("--json", action="store_true", help="the validated policy, or its problems, as JSON")
    check.add_argument(
        "--no-slurm",
        dest="ask_slurm",
        action="store_false",
        help="do not compare its partition names with Slurm's (by default they are, where Slurm answers)",
    )
    check.set_defaults(handler=_check, slurm=settings.slurm)


def _check(args: argparse.Namespace, console: Console) -> int:
    try:
        policy = load_policy(args.file)
    except PolicyError as error:
        if args.json:
            problems = [problem.model_dump() for problem in error.problems]
            print(json.dumps({"valid": False, "source": error.source, "problems": problems}, indent=2))
        else:
            print(error, file=sys.stderr)
        return INVALID
    cluster, unchecked = _cluster_partitions(args.slurm) if args.ask_slurm else (None, "--no-slurm")
    text = args.file.read_text(encoding="utf-8-sig")
    warnings = [] if cluster is None else partition_warnings(policy, text, cluster)
    if args.json:
        found = [warning.model_dump() for warning in warnings]
        document = {"valid": True, "policy": policy.model_dump(mode="json"), "warnings": found}
        print(
            json.dumps(document | {"slurm_partitions": cluster, "not_checked_because": unchecked}, indent=2)
        )
        return 0
    _summary(console, args.file, policy)
    for warning in warnings:
        print(f"warning: {warning.describe(str(args.file))}", file=sys.stderr)
    if unchecked is not None and args.ask_slurm:
        print(f"note: partition names not checked against Slurm: {unchecked}", file=sys.stderr)
    return 0


def _cluster_partitions(slurm: SlurmSettings) -> tuple[list[str] | None, str | None]:
    """The cluster's partition names, or why they could not be had (no Slurm reachable from here)."""
    from advisor.slurm.client import SlurmClient
    from advisor.slurm.runner import SlurmError, runner_for

    try:
        client = SlurmClient(runner_for(slurm), timeout_s=min(slurm.timeout_s, CHECK_TIMEOUT_S))
        return [partition.name for partition in client.partitions()], None
    except (SlurmError, ModuleNotFoundError) as error:  # over SSH, without the service's packages
        return None, str(error)


def _summary(console: Console, path: Path, policy: Policy) -> None:
    objective: str = policy.objective
    if policy.cost_weight is not None:
        objective += f" (cost weight {policy.cost_weight:g})"
    rewrite, limit, tuning = policy.rewrite, policy.time_limit, policy.tuning
    cap = "none" if limit.max_factor_of_request is None else f"{limit.max_factor_of_request:g} x requested"
    console.print(
        f"{path}: valid\n"
        f"mode {policy.mode}, objective {objective}\n"
        f"rewrite when gain >= {rewrite.min_gain_fraction:.0%} and >= {rewrite.min_gain_minutes:g} min, "
        f"confidence >= {rewrite.min_confidence}, model <= {rewrite.max_model_age_days:g} days old\n"
        f"time limit p90 x {limit.factor:g} + {limit.margin_minutes:g} min, at most {cap}\n"
        f"batch {tuning.batch}, AMP {_yes(tuning.amp)}, channels_last {_yes(tuning.channels_last)}, "
        f"GPUs per job {tuning.max_gpus or 'unlimited'}",
        highlight=False,
    )
    if policy.partitions:
        table = Table("partition", "mode", "per GPU-hour", "per CPU-hour", title="partitions")
        for name, part in policy.partitions.items():
            table.add_row(
                name, part.mode or "-", f"{part.price_per_gpu_hour:g}", f"{part.price_per_cpu_hour:g}"
            )
        console.print(table)
    for title, layer in (("accounts", policy.accounts), ("users", policy.users)):
        if layer:
            table = Table(title.rstrip("s"), "mode", "partitions", title=title)
            for name, rules in layer.items():
                allowed = "all" if rules.partitions is None else ", ".join(rules.partitions) or "none"
                table.add_row(name, rules.mode or "-", allowed)
            console.print(table)


def _yes(allowed: bool) -> str:
    return "allowed" if allowed else "never"
