"""The benchmark job a night submits to each partition: fingerprint, plan, measure, write JSON lines.

Run as ``python -m advisor.bench.job --out FILE`` inside a Slurm job. It exits 0 whenever the run itself
completed, however many configurations did not fit: those are results too.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from advisor.argtypes import add_plan_choice
from advisor.bench.fingerprint import fingerprint, threads_for_job
from advisor.bench.night import MeasuredOn, Tonight, tonight
from advisor.bench.plan import DeviceProfile, Plan, full_plan, loader_workers, nightly_grid
from advisor.bench.reporting import terminal_reporter
from advisor.bench.results import jsonl_sink
from advisor.bench.run import RunOn, run_plan
from advisor.bench.short_plans import check_plan, quick_plan
from advisor.bench.tables import zoo_table
from advisor.introspect.table_cache import keep_tables_in
from advisor.settings import SettingsError, load_settings

_QUICK_BUDGET_MINUTES = 2.5
"""Measuring time: with start-up (imports, introspection) the quick job stays within three minutes."""
_FULL_BUDGET_MINUTES = 180.0
_CHECK_BUDGET_MINUTES = 5.0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    keep_tables_in(_tables_dir())
    threads = threads_for_job(os.environ)
    torch.set_num_threads(threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("advisor bench: error: --device cuda, but torch sees no CUDA device", file=sys.stderr)
        return 2
    automatic = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(automatic if args.device == "auto" else args.device)
    limit = args.memory_limit_mb * 2**20 if args.memory_limit_mb is not None else None
    profile = DeviceProfile.assumed("cuda" if device.type == "cuda" else "cpu", _memory(device, limit))
    default = (
        _QUICK_BUDGET_MINUTES if args.quick else _CHECK_BUDGET_MINUTES if args.check else _FULL_BUDGET_MINUTES
    )
    if args.allow_factories and args.plan is None:
        print("advisor bench: error: --allow-factories goes with --plan", file=sys.stderr)
        return 2
    if args.plan is not None:
        plan, planned_minutes = _tonight(args.plan, profile, threads, args.partition)
        default = planned_minutes
    else:
        plan = _plan(args.quick, args.check, profile, threads)
    if args.plan_limit is not None:
        plan = plan.first(args.plan_limit)
    minutes = args.budget_minutes or default
    with terminal_reporter(len(plan.items), sys.stderr) as progress:
        on = RunOn(device, args.partition, memory_limit_bytes=limit, allow_factories=args.allow_factories)
        summary = run_plan(plan, on, budget_s=minutes * 60, sink=jsonl_sink(args.out), progress=progress)
    print(summary.model_dump_json())
    return 0


def _plan(quick: bool, check: bool, profile: DeviceProfile, threads: int) -> Plan:
    if quick:
        return quick_plan(zoo_table, profile)
    return (check_plan if check else full_plan)(profile, zoo_table, workers=loader_workers(threads))


def _tonight(path: Path, profile: DeviceProfile, threads: int, partition: str | None) -> tuple[Plan, float]:
    """The night planned for this partition's machine; if the job finds another machine here (new
    hardware, driver or torch), that machine's first night instead, in the same budget."""
    night = Tonight.model_validate_json(path.read_text(encoding="utf-8"))
    here = fingerprint(partition).machine()
    if night.machine is not None and night.machine != here:
        grid = nightly_grid(profile.kind, workers=loader_workers(threads))
        night = tonight(grid, profile, zoo_table, MeasuredOn(here, {}), [], night.budget_s)
    return night.plan(), night.budget_s / 60


def _tables_dir() -> Path | None:
    """The settings' layer-table folder; none where the settings cannot be read (the job measures anyway)."""
    try:
        return load_settings(os.environ).tables_dir
    except SettingsError:
        return None


def _memory(device: torch.device, limit: int | None) -> int:
    """What a configuration may use: the GPU's memory, or the host's, or less where a limit says so."""
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
    else:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return total if limit is None else min(total, limit)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m advisor.bench.job", description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="JSON-lines file the results are appended to")
    choice = add_plan_choice(parser)
    choice.add_argument("--plan", type=Path, help="tonight's plan (written by `advisor bench submit`)")
    parser.add_argument(
        "--device", choices=["auto", "cpu", "cuda"], default="auto", help="auto: CUDA where torch sees it"
    )
    parser.add_argument("--budget-minutes", type=float, help="stop starting measurements after this long")
    parser.add_argument("--partition", help="the Slurm partition, recorded in the fingerprint")
    parser.add_argument("--memory-limit-mb", type=int, help="treat configurations above this as not fitting")
    parser.add_argument("--plan-limit", type=int, help="keep only the plan's first N items (tests)")
    parser.add_argument(
        "--allow-factories",
        action="store_true",
        help="build package.module:factory models the plan names: only in the caller's own process "
        "(`advisor bench run --architecture`), never in a job the advisor submits",
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
