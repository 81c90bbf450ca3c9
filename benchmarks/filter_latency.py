"""Section 6 of `daemon_latency.py`: plain `sbatch --test-only SCRIPT` with the advisor's cli_filter loaded
and without, interleaved round by round, and what the filter adds (the helper's start and one `/advise`).

With ``--before TREE`` (a worktree of an older commit: ``git worktree add /tmp/wt-x COMMIT``) that tree's Lua
and helper run in the same rounds, against the same daemon: a before and after in one run on a noisy
machine. Its helper is this venv's ``advisor-cli-filter`` with ``PYTHONPATH=TREE``, as the old tree ran it.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from advisor.cli_filter import install

BIN = Path(sys.executable).parent
TIMEOUT_S = 30.0


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Seconds ``argv`` took to run to its end; it must succeed."""
    began = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=True)
    return time.perf_counter() - began


def _wall_and_cpu(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """`timed`, and the CPU seconds it cost (sbatch, the Lua's shell and the helper: every process waited
    for), which other people's load on the machine stretches far less than the wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(argv, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def filter_overhead(root: Path, script: Path, env: dict[str, str], runs: int, before: Path | None) -> None:
    variants = {"without the cli_filter": env}
    folder = _filtered_folder(root / "filtered", env)
    install(folder, BIN / "advisor-cli-filter", timeout_s=TIMEOUT_S)
    variants["with the cli_filter"] = {**env, "SLURM_CONF": str(folder / "slurm.conf")}
    if before is not None:
        folder = _filtered_folder(root / "filtered-before", env)
        lua = (before / "advisor" / "data" / "cli_filter.lua").read_text(encoding="utf-8")
        lua = lua.replace("@HELPER@", str(BIN / "advisor-cli-filter")).replace(
            "@TIMEOUT_S@", f"{TIMEOUT_S:g}"
        )
        (folder / "cli_filter.lua").write_text(lua, encoding="utf-8")
        conf = str(folder / "slurm.conf")
        variants[f"with {before}'s cli_filter"] = {**env, "SLURM_CONF": conf, "PYTHONPATH": str(before)}
    argv = ["sbatch", "--test-only", str(script)]
    for variant in variants.values():
        timed(argv, variant)  # warm the daemon's caches and each helper's bytecode
    took: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, variant in variants.items():
            took[name].append(_wall_and_cpu(argv, variant))
    medians = {
        name: tuple(statistics.median(kind) * 1000 for kind in zip(*times, strict=True))
        for name, times in took.items()
    }
    wall, cpu = medians.pop("without the cli_filter")
    width = max(map(len, variants))
    plain = "without the cli_filter"
    print(f"sbatch --test-only {plain:{width}}: median {wall:.0f} ms (CPU {cpu:.0f} ms) over {runs} runs")
    for name, (median, cpu_median) in medians.items():
        print(
            f"sbatch --test-only {name:{width}}: median {median:.0f} ms (CPU {cpu_median:.0f} ms), "
            f"adds {median - wall:.0f} ms (CPU {cpu_median - cpu:.0f} ms)"
        )


def _filtered_folder(folder: Path, env: dict[str, str]) -> Path:
    """A slurm.conf that loads cli_filter/lua, which sbatch finds beside it."""
    folder.mkdir()
    conf = Path(env["SLURM_CONF"]).read_text(encoding="utf-8")
    (folder / "slurm.conf").write_text(conf + "\nCliFilterPlugins=cli_filter/lua\n", encoding="utf-8")
    return folder
