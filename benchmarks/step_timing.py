"""Ways of timing one CPU training step, side by side on the same measurements: which agree across repeats.

Each configuration (zoo CNNs at 32x32, the given batches) is measured ``--repeats`` times in one shuffled
order, each time a new instance of the model timed in ``--groups`` groups of steps (each about 0.3 s, as
`advisor.bench.measure` sizes them), with the pace step (`advisor.bench.training.PACE`) before and after
every group. Per group and pace step it records the wall time and what the thread waited, runnable, for a
CPU another task held (`run_delay_s`). Then each way of reading those groups is scored by its repeat spread
(mean log(slowest / fastest) over each configuration's repeats) and its floor (each interior batch against
the line, in log batch and log seconds, through its model's neighbours; real kernel switches count too):

- today (before bc6b5d9): the first three groups' wall time over the mean of the pace steps around each;
- wall time alone, and own time (wall less the wait) alone;
- own time over the pace step's own time, the first three groups;
- the product's (`advisor.bench.measure`): that, a group that waited over 5% of its time left out while
  others are not (up to three times the groups).

Run: taskset -c 1 python -m benchmarks.step_timing --out timing.jsonl [--models a,b] [--batches 2,4,8]
(``--read timing.jsonl`` scores an earlier run again.)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from math import ceil, exp, log
from pathlib import Path
from typing import Any

import torch

from advisor.bench.measure import DISTURBED_SHARE, GROUP_S, MAX_GROUP, RETIMES
from advisor.bench.training import pace_step, run_delay_s, start_training
from advisor.records import StepConfig

Times = list[float]
"""Wall seconds and seconds waited for the CPU."""
Record = dict[str, Any]
"""One measurement: its model, batch, groups' and pace steps' times."""
_MODELS = (
    "squeezenet1_1,shufflenet_v2_x0_5,mobilenet_v3_small,resnet18,mobilenet_v2,efficientnet_b0,densenet121"
)
_KEPT = 3


def _clock() -> Times:
    return [time.perf_counter(), run_delay_s()]


def _since(start: Times) -> Times:
    return [now - then for now, then in zip(_clock(), start, strict=True)]


def measure(model: str, batch: int, groups: int) -> Record:
    """One instance of one configuration: each group's and each pace step's wall and waited seconds."""
    config = StepConfig(
        model=model, input_size=32, batch=batch, amp=False, channels_last=False, pinned=False, workers=0
    )
    pace = pace_step()
    training = start_training(config, torch.device("cpu"), 2 + groups * MAX_GROUP)
    began = time.perf_counter()
    training.compute(*training.fetch())
    size = min(MAX_GROUP, max(1, ceil(GROUP_S / (time.perf_counter() - began))))

    def paced() -> Times:
        start = _clock()
        pace()
        return _since(start)

    timed, paces = [], [paced()]
    for _ in range(groups):
        start = _clock()
        for _ in range(size):
            training.compute(*training.fetch())
        timed.append([seconds / size for seconds in _since(start)])
        paces.append(paced())
    return {"model": model, "batch": batch, "groups": timed, "paces": paces}


def _ratio(record: Record, kept: Sequence[int], own: bool) -> float:
    def seconds(times: Times) -> float:
        return times[0] - times[1] if own else times[0]

    groups, paces = record["groups"], record["paces"]
    return statistics.median(
        seconds(groups[i]) / statistics.mean([seconds(paces[i]), seconds(paces[i + 1])]) for i in kept
    )


def _undisturbed(record: Record) -> list[int]:
    """The groups the product keeps: the first three that waited at most `DISTURBED_SHARE`, of the first
    `RETIMES` x three; all of those where none is quiet."""
    timed = record["groups"][: RETIMES * _KEPT]
    quiet = [i for i, times in enumerate(timed) if times[1] <= DISTURBED_SHARE * times[0]][:_KEPT]
    return quiet or list(range(len(timed)))


WAYS: dict[str, Callable[[Record], float]] = {
    "today: wall / pace": lambda r: _ratio(r, range(_KEPT), own=False),
    "wall": lambda r: statistics.median(times[0] for times in r["groups"][:_KEPT]),
    "own (wall less the wait)": lambda r: statistics.median(t[0] - t[1] for t in r["groups"][:_KEPT]),
    "own / own pace": lambda r: _ratio(r, range(_KEPT), own=True),
    "product: own / own pace, disturbed retimed": lambda r: _ratio(r, _undisturbed(r), own=True),
}


def spread_and_floor(values: dict[tuple[str, int], list[float]]) -> tuple[float, float, float]:
    """Repeat spread; the floor of single measurements (each repeat's series apart); that of the means."""
    spread = statistics.mean(log(max(v) / min(v)) for v in values.values() if len(v) > 1)
    repeats = min(len(v) for v in values.values())
    singles = [_floor({key: [found[i]] for key, found in values.items()}, min) for i in range(repeats)]
    return spread, statistics.mean(singles), _floor(values, lambda v: exp(statistics.mean(map(log, v))))


def _floor(values: dict[tuple[str, int], list[float]], pick: Callable[[list[float]], float]) -> float:
    series: dict[str, dict[int, float]] = {}
    for (model, batch), found in values.items():
        series.setdefault(model, {})[batch] = pick(found)
    errors = []
    for times in series.values():
        sizes = sorted(times)
        for low, batch, high in zip(sizes, sizes[1:], sizes[2:], strict=False):
            share = (log(batch) - log(low)) / (log(high) - log(low))
            read = exp(log(times[low]) + share * (log(times[high]) - log(times[low])))
            errors.append(abs(read - times[batch]) / times[batch])
    return statistics.mean(errors)


def report(records: Sequence[Record]) -> None:
    waited = [times[1] / times[0] for record in records for times in record["groups"]]
    print(
        f"{len(records)} measurements, {len(waited)} groups; waited for the CPU: mean "
        f"{statistics.mean(waited):.1%} of a group, over {DISTURBED_SHARE:.0%} in "
        f"{sum(share > DISTURBED_SHARE for share in waited)}"
    )
    print(f"{'timed as':44} {'repeat spread':>14} {'floor, single':>14} {'floor, means':>13}")
    for name, way in WAYS.items():
        values: dict[tuple[str, int], list[float]] = {}
        for record in records:
            key = (record["model"], record["batch"])
            values.setdefault(key, []).append(way(record))
        spread, single, means = spread_and_floor(values)
        print(f"{name:44} {spread:14.1%} {single:14.1%} {means:13.1%}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--out", type=Path, help="JSON lines to write, one per measurement")
    parser.add_argument("--read", type=Path, help="score an earlier run's lines instead of measuring")
    parser.add_argument("--models", default=_MODELS, help="zoo CNNs, comma-separated")
    parser.add_argument("--batches", default="2,4,8,16,32", help="comma-separated")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--groups", type=int, default=6, help="timed groups per measurement")
    args = parser.parse_args(argv)
    if args.read:
        report([json.loads(line) for line in args.read.read_text(encoding="utf-8").splitlines()])
        return 0
    if args.out is None:
        parser.error("--out is required to measure")
    torch.set_num_threads(1)
    batches = [int(batch) for batch in args.batches.split(",")]
    items = [(model, batch) for model in args.models.split(",") for batch in batches] * args.repeats
    random.shuffle(items)
    records = []
    with args.out.open("w", encoding="utf-8") as out:
        for model, batch in items:
            records.append(measure(model, batch, args.groups))
            out.write(json.dumps(records[-1]) + "\n")
            out.flush()
    report(records)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
