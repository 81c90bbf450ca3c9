"""The nightly grid's sweeps of what is not compute, measured on this machine, and the rates fitted from them.

Runs the sweep phases of the device kind's nightly grid (`advisor.bench.sweeps`: memory-bound ops over
tensor sizes, the launch chain, the optimizer's update over parameter counts) as `advisor bench run` does
(`run_plan`, the same micro-benchmarks), then prints what `advisor.ops.rates.fit_rates` makes of them: each
op's bandwidth by size, seconds per launch, update seconds per parameter and per tensor, and the time the
sweeps took against the plan's estimate.

Run: taskset -c 1 python -m benchmarks.not_compute [--device cpu] [--out sweeps.jsonl] [--budget-minutes 10]
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace
from pathlib import Path

import torch

from advisor.bench.plan import DeviceKind, DeviceProfile, Phase, build_plan, nightly_grid
from advisor.bench.run import RunOn, run_plan
from advisor.introspect import LayerTable
from advisor.ops import op_of
from advisor.ops.rates import MachineRates, fit_rates
from advisor.records import LayerConfig, LayerMeasurement, ResultLine


def _no_table(name: str, size: int) -> LayerTable:
    raise AssertionError(f"the sweeps plan introspects no model ({name} at {size})")


def _paced(layers: list[LayerMeasurement]) -> list[tuple[LayerConfig, float]]:
    """Each median at the run's median pace (its ratio to the pace step around it), as training counts a
    paced measurement: a shared core's neighbours come and go within a run."""
    paces = [m.pace_s for m in layers if m.pace_s]
    pace = statistics.median(paces) if paces else 0.0
    return [(m.config, m.pace_ratio * pace if m.pace_ratio else m.median_s or 0.0) for m in layers]


def _show(rates: MachineRates, measured: list[tuple[LayerConfig, float]]) -> None:
    print("bandwidth, GB/s (forward and backward bytes moved / median seconds), by tensor elements:")
    sizes = sorted({c.in_channels * c.height * c.width for c, _ in measured if c.op in rates.curves})
    print(f"{'op':<12}" + "".join(f"{_count(n):>8}" for n in sizes))
    for op in rates.curves:
        row = {c.in_channels * c.height * c.width: (c, s) for c, s in measured if c.op == op}
        cells = [f"{_moved(*row[n]) / row[n][1] / 1e9:8.2f}" if n in row else f"{'-':>8}" for n in sizes]
        print(f"{op:<12}" + "".join(cells))
    for moved in (1e5, 1e6, 1e7, 1e8, 1e9):
        print(f"all ops, {moved:.0e} bytes moved: {(rates.bytes_per_s(moved) or 0) / 1e9:.2f} GB/s")
    launch = rates.launch_s
    print(f"launch chain: {launch * 1e6:.1f} us per launched op" if launch else "launch chain: not measured")
    counts = (10**5, 10**6, 11_689_512, 25_557_032)
    print(
        "update, ms, in 62 tensors at "
        + ", ".join(f"{n:,}" for n in counts)
        + " parameters (resnet18, 50's):"
    )
    for name, fit in rates.updates.items():
        times = ", ".join(f"{fit.seconds(n, 62) * 1e3:.2f}" for n in counts)
        print(f"{name:<12} {times}; {fit.per_parameter_s * 1e9:.2f} ns per parameter at the largest")


def _moved(config: LayerConfig, _seconds: float) -> float:
    cost = op_of(config).cost(config)
    return cost.forward_bytes + cost.backward_bytes


def _count(n: int) -> str:
    for unit, size in (("Mi", 2**20), ("Ki", 2**10)):
        if n >= size:
            return f"{n / size:g}{unit}"
    return str(n)


def _measure(kind: DeviceKind, budget_minutes: float, out: Path | None) -> list[ResultLine]:
    """The sweep phases of the device kind's nightly grid, as `advisor bench run` measures them."""
    grid = replace(nightly_grid(kind), models=(), layer_models=())
    plan = build_plan(grid, DeviceProfile.assumed(kind), _no_table)
    lines: list[ResultLine] = []
    summary = run_plan(plan, RunOn(torch.device(kind), None), budget_s=budget_minutes * 60, sink=lines.append)
    if out:
        out.write_text("".join(line.model_dump_json() + "\n" for line in lines))
    phases = ", ".join(phase for phase in Phase if phase in {item.phase for item in plan.items})
    took = f"{summary.elapsed_s:.0f} s (estimated {plan.estimate_s:.0f} s); {summary.failed} failed"
    print(f"{summary.measured} of {summary.planned} sweep items ({phases}) measured in {took}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--out", type=Path, help="the measurements as JSON lines (`advisor bench ingest`)")
    parser.add_argument("--budget-minutes", type=float, default=10.0)
    parser.add_argument(
        "--results", type=Path, help="fit these JSON lines instead of measuring (a night's, the GPU check's)"
    )
    parser.add_argument("--raw", action="store_true", help="each median as measured, not at the run's pace")
    args = parser.parse_args()
    if args.results:
        lines = [
            ResultLine.model_validate_json(text) for text in args.results.read_text().splitlines() if text
        ]
    else:
        lines = _measure(args.device, args.budget_minutes, args.out)
    layers = [line.measurement for line in lines if isinstance(line.measurement, LayerMeasurement)]
    timed = [m for m in layers if m.median_s is not None]
    measured = [(m.config, m.median_s or 0.0) for m in timed] if args.raw else _paced(timed)
    _show(fit_rates(measured), measured)


if __name__ == "__main__":
    main()
