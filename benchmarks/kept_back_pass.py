"""Models kept back, measured inside the nightly pass's own process: a truth for them the zoo's way.

The CNNs no zoo has were judged against a truth taken in fresh first-sight processes, each step as a ratio to
that process's pace step at the zoo's pace. A fresh process's pace step strays with the process (37 to 60 ms
in three processes of one architecture, while its steps' wall times agreed within a few percent:
benchmarks/README.md), so that truth moved 20-40% by process and the kept-back figure with it. Here the
kept-back architectures' whole steps, at the grid's batches, are planned twice among the nightly CPU grid's
own steps (once among its batches, once among its repeats, at seeded random places), measured by the
benchmark job in the pass's one process, and split out afterwards: the zoo database without them, and
each one's steps as ``benchmarks/architecture_transfer.py --reuse-truth`` reads a truth::

    python -m benchmarks.kept_back_pass plan --out plan.json
    taskset -c 1 python -m advisor.bench.job --out pass.jsonl --device cpu --plan plan.json \\
        --allow-factories --budget-minutes 48 --partition cpu
    python -m benchmarks.kept_back_pass split --results pass.jsonl --work DIR
    python -m benchmarks.architecture_transfer --zoo DIR/zoo.db --partition cpu --work DIR/truth \\
        --reuse-truth --arms "zoo only" --step-model today opsum blend

Run from the repository's root (the factories are ``benchmarks.harness.transfer_nets``'s).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from random import Random

from advisor.bench.architectures import Architectures
from advisor.bench.night import NightItem, Priority, Tonight, whole_steps
from advisor.bench.plan import DeviceProfile, Phase, Plan, full_plan, nightly_grid
from advisor.bench.results import read_jsonl
from advisor.bench.tables import zoo_table
from advisor.introspect import LayerTable
from advisor.introspect.run import introspect
from advisor.store import Store
from benchmarks.architecture_transfer import DEFAULT, slug

BUDGET_MINUTES = 48.0
"""The nightly pass's 45 minutes and the kept-back steps' few."""
SEED = 51


def with_kept_back(plan: Plan, extra: Sequence[NightItem], seed: int = SEED) -> Tonight:
    """The plan as a night (what the benchmark job's ``--plan`` reads), ``extra`` placed twice: once at
    random among its batches phase, once among its repeats (where it has none, among its batches again)."""
    entries = [NightItem(priority=Priority.GRID, subject="grid", item=item) for item in plan.items]
    random = Random(seed)  # noqa: S311 (places in a plan, not a secret)
    places = []
    for phase in (Phase.BATCHES, Phase.REPEATS):
        at = [i for i, entry in enumerate(entries) if entry.item.phase is phase]
        at = at or [i for i, entry in enumerate(entries) if entry.item.phase is Phase.BATCHES]
        places += [(random.randint(at[0], at[-1]), item) for item in extra]
    for index, item in sorted(places, key=lambda place: -place[0]):
        entries.insert(index, item)
    return Tonight(
        machine=None,
        budget_s=BUDGET_MINUTES * 60,
        entries=tuple(entries),
        grid_items=len(plan.items),
        covered=0,
        steps=plan.steps,
        warmup=plan.warmup,
        repeats=plan.repeats,
    )


def kept_back_steps(tables: Sequence[LayerTable]) -> list[NightItem]:
    """Each table's whole steps at the nightly CPU grid's batches, as the grid measures the zoo's."""
    grid, device = nightly_grid("cpu"), DeviceProfile.assumed("cpu")
    return [
        NightItem(priority=Priority.SUBMITTED, subject=table.reference, item=item)
        for table in tables
        for item in whole_steps(grid, device, table, grid.batches)
    ]


def split(results: Path, work: Path, tables: Sequence[LayerTable]) -> dict[str, int]:
    """``work``/full.db (every result, the tables recorded for training to find), ``work``/zoo.db (without
    the kept-back steps) and ``work``/truth/SLUG-truth.db (one architecture's steps alone); the rows each
    truth holds, by reference."""
    work.mkdir(parents=True, exist_ok=True)
    full = work / "full.db"
    full.unlink(missing_ok=True)
    store = Store.open(full)
    store.ingest(read_jsonl(results))
    for table in tables:
        Architectures(store).record(table, datetime.now(UTC), requested=False)
    store.db.conn.close()
    references = [table.reference for table in tables]
    _copy(full, work / "zoo.db", [("delete from step_measurements where model = ?", r) for r in references])
    (work / "truth").mkdir(exist_ok=True)
    held = {}
    for reference in references:
        truth = work / "truth" / f"{slug(reference)}-truth.db"
        held[reference] = _copy(full, truth, [("delete from step_measurements where model != ?", reference)])
    return held


def _copy(source: Path, target: Path, deletes: Sequence[tuple[str, str]]) -> int:
    """A consistent copy of ``source`` (SQLite's backup: a file copy can miss what its log still holds),
    less the step rows each delete names; the step rows left."""
    target.unlink(missing_ok=True)
    with sqlite3.connect(source) as origin, sqlite3.connect(target) as copy:
        origin.backup(copy)
        for statement, model in deletes:
            copy.execute(statement, (model,))
        left = int(copy.execute("select count(*) from step_measurements").fetchone()[0])
    origin.close()
    copy.close()
    return left


def _tables(references: Sequence[str]) -> list[LayerTable]:
    return [introspect(reference, (3, 32, 32), {}, allow_factories=True) for reference in references]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    tables = _tables(args.architectures)
    if args.command == "plan":
        plan = full_plan(DeviceProfile.assumed("cpu"), zoo_table)
        night = with_kept_back(plan, kept_back_steps(tables))
        args.out.write_text(night.model_dump_json(), encoding="utf-8")
        print(f"{len(plan.items)} grid items and {len(night.entries) - len(plan.items)} kept-back steps")
        return 0
    for reference, rows in split(args.results, args.work, tables).items():
        print(f"{reference}: {rows} steps measured in the pass")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--architectures", nargs="+", default=list(DEFAULT))
    commands = parser.add_subparsers(dest="command", required=True)
    plan = commands.add_parser("plan", help="the nightly CPU plan with the kept-back steps, as a night")
    plan.add_argument("--out", type=Path, required=True)
    cut = commands.add_parser("split", help="the pass's results as zoo.db and one truth per architecture")
    cut.add_argument("--results", type=Path, required=True)
    cut.add_argument("--work", type=Path, required=True)
    return parser


if __name__ == "__main__":
    sys.exit(main())
