"""A pass's results with each optimizer-update configuration at one of its places (`Sweeps.update_places`):
its first (what the plan before the places measured) or its slowest by the ratio to its pace step (what one
place in the pass's slowest spell would have priced), every other row as it was. Split and judged as the
pass is, they set the places' worth beside it (benchmarks/README.md)::

    python -m benchmarks.update_places --results pass.jsonl --keep first --out pass_first.jsonl
    python -m benchmarks.kept_back_pass split --results pass_first.jsonl --work W_first
    taskset -c 1 python -m benchmarks.profile_shares --db W_first/zoo.db --keep prof.json
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from advisor.bench.results import read_jsonl
from advisor.ops import op_of
from advisor.records import LayerConfig, LayerMeasurement, ResultLine


def one_place(lines: Sequence[ResultLine], keep: str) -> list[ResultLine]:
    """``lines`` with each update configuration's rows cut to one: the first, or the slowest."""
    places: dict[LayerConfig, list[int]] = {}
    for index, line in enumerate(lines):
        measured = line.measurement
        if isinstance(measured, LayerMeasurement) and op_of(measured.config).family == "update":
            places.setdefault(measured.config, []).append(index)
    chosen = {
        min(at) if keep == "first" else max(at, key=lambda i: _ratio(lines[i])) for at in places.values()
    }
    dropped = {index for at in places.values() for index in at} - chosen
    return [line for index, line in enumerate(lines) if index not in dropped]


def _ratio(line: ResultLine) -> float:
    measured = line.measurement
    return float(getattr(measured, "pace_ratio", None) or getattr(measured, "median_s", 0.0) or 0.0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--keep", choices=["first", "slowest"], required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    lines = read_jsonl(args.results)
    kept = one_place(lines, args.keep)
    args.out.write_text("".join(line.model_dump_json() + "\n" for line in kept), encoding="utf-8")
    print(f"{len(kept)} rows kept, {len(lines) - len(kept)} update rows at other places left out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
