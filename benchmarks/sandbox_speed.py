"""How much slower the sandbox's slow partitions really measure: the quick plan's first steps on a100 (speed
1.0), v100 (0.7) and t4 (0.4), one benchmark job at a time, in rounds; step medians relative to a100.

Run from the repository root as root (the CPU controller is the kernel's):
``python -m benchmarks.sandbox_speed [--rounds 2] [--plan-limit 4] [--dir DIR]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from advisor.bench.measuring import wait_for_jobs
from advisor.bench.results import read_jsonl
from advisor.bench.submit import BenchRequest, submit_benchmarks
from advisor.records import StepMeasurement
from advisor.sandbox.cluster import Sandbox
from advisor.sandbox.spec import load_spec
from advisor.settings import package_data
from advisor.settings.validated import BenchSettings

PARTITIONS = ("a100", "v100", "t4")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--plan-limit", type=int, default=4)
    parser.add_argument("--dir", type=Path, help="the sandbox's folder (default: a new temporary one)")
    args = parser.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="advisor-speed-"))
    sandbox = Sandbox(load_spec(package_data("sandbox.toml")), folder)
    for note in sandbox.up().notes:
        print(f"note: {note}")
    try:
        partitions = [p for p in sandbox.client.partitions() if p.name in PARTITIONS]
        for round_ in range(1, args.rounds + 1):
            request = BenchRequest(
                python=sys.executable,
                results_dir=folder / f"round-{round_}",
                budget=timedelta(minutes=4),
                quick=True,
                one_at_a_time=True,
                extra=("--plan-limit", str(args.plan_limit)),
                site=BenchSettings(cpu_only=True),
            )
            night = submit_benchmarks(sandbox.client, partitions, request, datetime.now(UTC))
            wait_for_jobs(sandbox.client, night.jobs, timeout=timedelta(minutes=15), poll_s=1.0)
            steps: dict[str, dict[str, float]] = {}
            for job in night.jobs:
                for line in read_jsonl(job.results):
                    measured = line.measurement
                    if isinstance(measured, StepMeasurement) and measured.median_s:
                        name = f"{measured.config.model} batch {measured.config.batch}"
                        steps.setdefault(name, {})[job.partition] = measured.median_s
            for name, times in steps.items():
                if "a100" not in times:
                    continue
                shown = ", ".join(
                    f"{p} {times[p] * 1000:.1f} ms ({times[p] / times['a100']:.2f}x)"
                    for p in PARTITIONS
                    if p in times
                )
                print(f"round {round_}: {name}: {shown}")
    finally:
        sandbox.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
