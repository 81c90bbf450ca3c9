"""The next slice of the nightly grid on this machine: what the committed results have not measured yet.

python -m benchmarks.gpu.slice_plan --device cuda --budget-minutes 30 --out plan.json RESULTS.jsonl...

Reads committed results (`benchmarks/results/<machine>/*.jsonl`: JSON lines, each with the fingerprint of
the machine that measured it), keeps the configurations this machine measured (one that did not fit
counts: measuring it again would say the same), and writes the night `python -m advisor.bench.job --plan`
runs: the coarse grid first, then the rest of the grid in its order, from where the data stops. Unlike a
deployed night it keeps no share for re-measuring old results: a slice measures what is new. Plan more
than the run's budget: estimates are rough, and the job stops at its own budget, in the plan's order.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from advisor.bench.night import MeasuredOn, Priority, Tonight, tonight
from advisor.bench.plan import DeviceKind, DeviceProfile, Grid, TableSource, loader_workers, nightly_grid
from advisor.bench.results import read_jsonl
from advisor.records import ResultLine


def measured_on(lines: Iterable[ResultLine], machine: str) -> MeasuredOn:
    """When ``machine`` last measured each configuration in ``lines``, by the configuration's key (the
    other machines' lines are left out)."""
    last: dict[str, datetime] = {}
    for line in lines:
        if line.fingerprint.machine() == machine:
            key, at = line.measurement.config.key(), line.measured_at
            last[key] = max(at, last.get(key, at))
    return MeasuredOn(machine, last)


def next_slice(
    grid: Grid, device: DeviceProfile, tables: TableSource, history: MeasuredOn, budget_s: float
) -> Tonight:
    """The grid's items ``history`` lacks, in the night's order, within ``budget_s`` of estimates."""
    night = tonight(grid, device, tables, history, [], budget_s)
    fresh = tuple(entry for entry in night.entries if entry.priority is not Priority.FRESHNESS)
    return night.model_copy(update={"entries": fresh})


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    import torch

    from advisor.bench.fingerprint import fingerprint, threads_for_job
    from advisor.bench.tables import zoo_table

    # The machine as the benchmark job will fingerprint it (its CPU count is the torch thread count).
    threads = threads_for_job(os.environ)
    torch.set_num_threads(threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("slice_plan: error: --device cuda, but torch sees no CUDA device", file=sys.stderr)
        return 2
    machine = fingerprint(None).machine()
    memory = torch.cuda.get_device_properties(0).total_memory if args.device == "cuda" else None
    try:
        lines = [line for path in args.results for line in read_jsonl(path)]
    except (OSError, ValueError) as error:
        print(f"slice_plan: error: {error}", file=sys.stderr)
        return 2
    history = measured_on(lines, machine)
    kind: DeviceKind = args.device
    grid = nightly_grid(kind, workers=loader_workers(threads))
    if args.models:
        unknown = sorted(set(args.models) - set(grid.models))
        if unknown:
            print(f"slice_plan: error: not in the {kind} grid: {', '.join(unknown)}", file=sys.stderr)
            return 2
        grid = replace(grid, models=tuple(args.models), layer_models=tuple(args.models))
    profile = DeviceProfile.assumed(kind, memory)
    night = next_slice(grid, profile, zoo_table, history, args.budget_minutes * 60)
    args.out.write_text(night.model_dump_json(), encoding="utf-8")
    print(_said(night, len(lines), len(args.results)))
    return 0


def _said(night: Tonight, lines: int, files: int) -> str:
    phases: dict[str, int] = {}
    for entry in night.entries:
        phases[entry.item.phase] = phases.get(entry.item.phase, 0) + 1
    planned = ", ".join(f"{count} {phase}" for phase, count in phases.items()) or "nothing"
    return (
        f"machine {night.machine}: {night.covered} of the grid's {night.grid_items} configurations measured "
        f"({lines} result lines in {files} files); this slice plans {len(night.entries)} ({planned}), "
        f"estimated {night.estimate_s / 60:.1f} min"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu.slice_plan", description=__doc__)
    parser.add_argument(
        "results", type=Path, nargs="*", help="committed JSON-lines results (none: a new machine)"
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--budget-minutes", type=float, default=30.0, help="of the planner's estimates")
    parser.add_argument("--out", type=Path, required=True, help="the plan, for `advisor.bench.job --plan`")
    parser.add_argument(
        "--models",
        type=lambda text: text.split(","),
        help="only these of the grid's models, comma-separated (a rehearsal's small slice)",
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
