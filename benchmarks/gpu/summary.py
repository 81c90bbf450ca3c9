"""The short table `check.sh` and `slice.sh` print last, from the files they wrote: what was measured and
what failed (a part the script does not run is not shown).

python benchmarks/gpu/summary.py DIR
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any


def main(folder: Path) -> int:
    sliced = (folder / "plan.txt").is_file()
    lines = [f"GPU {'slice' if sliced else 'check'} in {folder}"]
    lines += _tail("ran on", folder / "versions.txt", keep=lambda line: True)
    if sliced:
        lines += _tail("plan (benchmarks.gpu.slice_plan)", folder / "plan.txt", keep=_plan_line)
    lines += _bench(folder / "bench.jsonl", folder / "bench.log")
    if not sliced:
        lines += _tail("speed-ups (runtime_speedup.py)", folder / "speedup.txt", keep=_speedup_line)
        lines += _tail("CUDA-only tests", folder / "pytest.txt", keep=_pytest_line)
    print("\n".join(lines))
    return 0


def _bench(results: Path, log: Path) -> list[str]:
    lines = ["", "benchmark (advisor.bench.job)"]
    records = _records(results)
    kinds: Counter[str] = Counter()
    peak = 0
    for record in records:
        measurement = record.get("measurement", {})
        config = measurement.get("config", {})
        kind = measurement.get("kind", "?")
        flags = [name for name in ("amp", "channels_last") if config.get(name)]
        if kind == "layer":
            # By op: the grid's convolutions and linears, its memory-bound sweeps, the launch chain, updates.
            kind = f"layer {config.get('op', '?')}"
        if str(config.get("op", "")).startswith("conv"):
            flags.append("cudnn benchmark" if config.get("cudnn_benchmark") else "cudnn default")
            if config.get("groups", 1) > 1:
                flags.append("depthwise" if config.get("groups") == config.get("in_channels") else "grouped")
        status = "measured" if measurement.get("fits") and measurement.get("median_s") else "not measured"
        kinds[f"{kind} {status}: {', '.join(flags) or 'plain'}"] += 1
        peak = max(peak, measurement.get("peak_memory_bytes") or 0)
    lines += [f"  {count:>5}  {what}" for what, count in sorted(kinds.items())]
    lines.append(f"  largest step peak memory: {peak / 2**30:.2f} GiB")
    summary = _last_json(log)
    if summary:
        lines.append(
            "  run: "
            + ", ".join(f"{key} {summary[key]}" for key in ("planned", "measured", "did_not_fit", "failed"))
            + f", {summary.get('elapsed_s', 0):.0f} s"
        )
    lines += [f"  {line}" for line in _lines(log) if line.startswith("bench: exit")]
    return lines


def _records(path: Path) -> list[dict[str, Any]]:
    found = []
    for line in _lines(path):
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return found


def _last_json(path: Path) -> dict[str, Any] | None:
    for line in reversed(_lines(path)):
        if line.startswith('{"run_id"'):
            parsed: dict[str, Any] = json.loads(line)
            return parsed
    return None


def _tail(title: str, path: Path, keep: Callable[[str], bool]) -> list[str]:
    return ["", title, *(f"  {line}" for line in _lines(path) if keep(line))]


def _plan_line(line: str) -> bool:
    return line.startswith(("machine ", "plan: exit")) or "rror" in line


def _speedup_line(line: str) -> bool:
    return bool(re.search(r"\d\.\d\dx|^model |^torch |exit \d", line)) or "Error" in line


def _pytest_line(line: str) -> bool:
    return bool(
        re.match(r"(PASSED|FAILED|ERROR|SKIPPED) |=+ .*(passed|failed|skipped|error)|pytest: exit", line)
    )


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return [f"(no {path.name})"]


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
