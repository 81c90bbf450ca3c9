"""How long `advisor --help` and `advisor parse` take to answer, this tree beside an older one.

Run from the repository root: ``python -m benchmarks.cli_start [--before TREE] [--runs 30]`` (TREE: a worktree
of an older commit, ``git worktree add /tmp/wt-x COMMIT``). Each tree runs this venv's `advisor` with
``PYTHONPATH=TREE``, the trees interleaved run by run, so a noisy machine slows both alike; pin it to one core
(``taskset -c 1``) for steadier figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADVISOR = str(Path(sys.executable).parent / "advisor")
COMMANDS = {"--help": ["--help"], "parse": ["parse", str(ROOT / "examples" / "demo.sbatch"), "--json"]}


def _seconds(tree: Path, words: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    subprocess.run([ADVISOR, *words], env=env, stdout=subprocess.DEVNULL, check=True, timeout=60)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cli_start", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--before", type=Path, help="an older tree, timed in the same rounds")
    parser.add_argument("--runs", type=int, default=30, help="runs of each command per tree (default 30)")
    args = parser.parse_args()
    trees = [tree for tree in (args.before, ROOT) if tree is not None]
    times: dict[tuple[str, Path], list[float]] = {(name, tree): [] for name in COMMANDS for tree in trees}
    for _ in range(args.runs):
        for name, words in COMMANDS.items():
            for tree in trees:
                times[name, tree].append(_seconds(tree, words))
    for (name, tree), seconds in times.items():
        ordered = sorted(seconds)
        low, high = ordered[len(ordered) // 4], ordered[3 * len(ordered) // 4]
        print(
            f"advisor {name:<7} {tree}: median {statistics.median(ordered) * 1000:.0f} ms "
            f"(quartiles {low * 1000:.0f}-{high * 1000:.0f} ms, {len(ordered)} runs)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
