"""`advisor daemon`: the service, with its background jobs (`advisor.daemon.schedule`)."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from advisor.daemon.limits import Limits
from advisor.daemon.schedule import start_jobs  # APScheduler and the store: a base install says so at once
from advisor.daemon.transport import UnsafeSocketDirectory
from advisor.jobscript.datasets import DatasetsFileError, load_datasets
from advisor.settings.validated import Settings
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import runner_for

if TYPE_CHECKING:
    from advisor.daemon.app import AdviceService, ServiceInputs

log = logging.getLogger("advisor.daemon")
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
    from advisor.daemon.server import Listen, serve

    inputs = _inputs(args, console)
    if inputs is None:
        return 1
    advisor, client = _compose(inputs, args.settings)
    scheduler = start_jobs(advisor, client, args.settings, args.db, args.models_dir)
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


def _inputs(args: argparse.Namespace, console: Console) -> ServiceInputs | None:
    """What the service reads at the start, from the options and the settings; None where a file is bad
    (the error printed)."""
    from advisor.daemon.app import ServiceInputs
    from advisor.daemon.step_times import StepTimesError, load_step_times
    from advisor.history.service import MODEL_FILE
    from advisor.predict.service import load_specs

    specs = load_specs(args.gpu_specs) if args.gpu_specs.is_dir() else []
    try:
        datasets = load_datasets(args.settings.datasets)
        step_times = None if args.step_times is None else load_step_times(args.step_times)
    except (DatasetsFileError, StepTimesError) as error:
        console.print(f"advisor: error: {error}", highlight=False)
        return None
    return ServiceInputs(
        database=args.db,
        policy=args.policy,
        specs=specs,
        datasets=datasets,
        history_model=args.models_dir / MODEL_FILE,
        admins=frozenset(args.settings.admins),
        bench=args.settings.bench,
        step_times=step_times,
    )


def _compose(inputs: ServiceInputs, settings: Settings) -> tuple[AdviceService, SlurmClient]:
    """The service on Slurm through a runner that counts its failures for /metrics and /health."""
    from advisor.daemon.app import AdviceService, utc_now
    from advisor.daemon.metrics import CountingRunner, Metrics

    metrics, slurm = Metrics(), settings.slurm
    runner = CountingRunner(runner_for(slurm), metrics)
    client = SlurmClient(runner, timeout_s=slurm.timeout_s)
    advisor = AdviceService(inputs, client, utc_now, metrics, runner.failure_since)
    metrics.watch_models(advisor.store, utc_now)
    if advisor.policy.last_error is not None:
        log.error("policy not loaded, the built-in default is in force: %s", advisor.policy.last_error)
    return advisor, client
