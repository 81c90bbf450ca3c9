"""`advisor sandbox up|down|status`: the real Slurm cluster on this machine, a tool beside the product.

`advisor` loads this module only when the command is `sandbox` (or for the manual and completion); the
cluster's own modules load in the handlers.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from advisor import readable

if TYPE_CHECKING:
    from rich.console import Console

    from advisor.sandbox.cluster import Sandbox, SandboxStatus
    from advisor.settings.validated import Settings


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    sandbox = commands.add_parser("sandbox", help="a real Slurm cluster on this machine")
    actions = sandbox.add_subparsers(required=True, metavar="ACTION")
    for name, handler, help_text in (
        ("up", _up, "start the cluster (idempotent) and wait until every node serves jobs"),
        ("down", _down, "stop the processes that `up` started"),
        ("status", _status, "say what runs"),
    ):
        action = actions.add_parser(name, help=help_text)
        action.add_argument(
            "--dir",
            type=Path,
            default=settings.sandbox_dir,
            help="folder for all of the cluster's state (default: %(default)s; $ADVISOR_SANDBOX_DIR)",
        )
        action.add_argument(
            "--config",
            type=Path,
            default=settings.sandbox_config,
            help="cluster description (default: %(default)s, or $ADVISOR_SANDBOX_CONFIG)",
        )
        if name == "up":
            action.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (default 120)")
        if name != "down":
            action.add_argument("--json", action="store_true", help="the daemons and partitions as JSON")
        action.set_defaults(handler=handler)


def _sandbox(args: argparse.Namespace) -> Sandbox:
    from advisor.sandbox.cluster import Sandbox
    from advisor.sandbox.spec import load_spec

    return Sandbox(load_spec(args.config), args.dir)


def _up(args: argparse.Namespace, console: Console) -> int:
    sandbox = _sandbox(args)
    status = sandbox.up(timeout_s=args.timeout)
    if args.json:
        print(status.model_dump_json(indent=2))
        return 0
    _print_status(console, status)
    console.print(f"\nUse it: export SLURM_CONF={sandbox.layout.slurm_conf}", highlight=False)
    return 0


def _down(args: argparse.Namespace, console: Console) -> int:
    stopped = _sandbox(args).down()
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running", highlight=False)
    return 0


def _status(args: argparse.Namespace, console: Console) -> int:
    status = _sandbox(args).status()
    if args.json:
        print(status.model_dump_json(indent=2))
    else:
        _print_status(console, status)
    return 0 if status.running else 3


def _print_status(console: Console, status: SandboxStatus) -> None:
    from rich.table import Table

    if not status.daemons:
        console.print(f"no sandbox runs in {status.root}", highlight=False)
        return
    for note in status.notes:
        console.print(f"note: {note}", highlight=False)
    daemons = Table(title=f"sandbox in {status.root}")
    for column in ("daemon", "pid", "state"):
        daemons.add_column(column)
    for daemon in status.daemons:
        daemons.add_row(daemon.name, str(daemon.pid), "running" if daemon.running else "stopped")
    console.print(daemons)
    partitions = Table(title="partitions")
    for column in ("partition", "nodes", "GPUs per node", "CPUs per node", "memory per node", "max time"):
        partitions.add_column(column)
    for part in status.partitions:
        states = Counter(node.state for node in part.nodes)
        gpus = f"{part.gpus_per_node} x {part.gpu_type or 'gpu'}" if part.gpus_per_node else "-"
        partitions.add_row(
            part.name + ("*" if part.is_default else ""),
            ", ".join(f"{count} {state}" for state, count in sorted(states.items())),
            gpus,
            str(part.cpus_per_node),
            readable.size_mb(part.memory_per_node_mb),
            "unlimited" if part.max_time is None else readable.duration(part.max_time),
        )
    console.print(partitions)
