"""Curves in the batch size, pure: a layer's polyline through its micro-benchmarks, the step model's shared
batch correction and each measured model's own, all interpolated between measured batch sizes; and the
median polish that finds the shared correction (and the registry's run levels)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from itertools import pairwise
from math import log
from statistics import median
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

_TINY = 1e-9
_POLISH_ROUNDS = 4
Polyline = tuple[tuple[int, float], ...]
"""A layer's (batch, seconds) at its benchmarked batch sizes, sorted by batch."""
R = TypeVar("R", bound=Hashable)
C = TypeVar("C", bound=Hashable)


def through(points: Polyline, batch: int) -> float:
    """Seconds at ``batch`` on the polyline through a layer's (batch, seconds), sorted by batch: a kernel
    may switch algorithm between two benchmarked batch sizes (on one thread PyTorch runs stride-1 1x1
    convolutions without oneDNN below batch 16, several times slower), so no one line fits them all."""
    seconds = dict(points)
    return max(sum(weight * seconds[b] for b, weight in through_weights(points, batch)), _TINY)


def segment(points: Polyline, batch: int) -> Polyline:
    """The one or two points ``through_weights`` reads at ``batch``: the segment around it, or the nearest
    one beyond the ends."""
    if len(points) == 1:
        return points
    index = next((i for i in range(1, len(points) - 1) if batch <= points[i][0]), len(points) - 1)
    return points[index - 1 : index + 1]


def through_weights(points: Polyline, batch: int) -> tuple[tuple[int, float], ...]:
    """(benchmarked batch, weight) whose weighted seconds are ``through``'s: which measurements a time
    comes from, so the step base can weigh each. Beyond the ends the nearest segment's slope, or proportion
    where that slope is not positive."""
    ends = segment(points, batch)
    if len(ends) == 1:
        return ((ends[0][0], batch / ends[0][0]),)
    (b0, t0), (b1, t1) = ends
    if batch > b1 and t1 <= t0:
        return ((b1, batch / b1),)
    if batch < b0 and t1 <= t0:
        return ((b0, batch / b0),)
    share = (batch - b0) / (b1 - b0)
    return ((b0, 1.0 - share), (b1, share))


def interpolate(points: Sequence[tuple[float, float]], x: float) -> float:
    """Piecewise-linear through ``points`` (sorted by x), held constant beyond the ends."""
    if not points:
        return 0.0
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in pairwise(points):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


class MeasuredCurve(BaseModel):
    """One architecture measured whole, in one precision and layout: (log batch, log ratio of the measured
    step to the linear base) at each batch size it ran."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    architecture: str
    amp: bool
    channels_last: bool
    points: tuple[tuple[float, float], ...]


Series = tuple[str, bool, bool]
"""An architecture measured whole, in one precision and layout: (architecture hash, amp, channels last)."""


def measured_curves(ratios: Iterable[tuple[Series, int, float]]) -> tuple[MeasuredCurve, ...]:
    """Each series' curve from its (series, batch, log ratio to the base) measurements: the median ratio
    at each batch size it ran."""
    by_series: dict[Series, dict[float, list[float]]] = {}
    for key, batch, ratio in ratios:
        by_series.setdefault(key, {}).setdefault(log(batch), []).append(ratio)
    return tuple(
        MeasuredCurve(
            architecture=architecture,
            amp=amp,
            channels_last=channels_last,
            points=tuple(sorted((x, float(median(r))) for x, r in by_batch.items())),
        )
        for (architecture, amp, channels_last), by_batch in sorted(by_series.items())
    )


def median_polish(cells: Iterable[tuple[R, C, float]]) -> tuple[dict[R, float], dict[C, float]]:
    """Row levels and column effects of (row, column, value) cells of a table with holes, by median polish:
    a column only some rows reach is measured against those rows' own levels, not against the level of all
    of them. The rows' levels are centred on zero; robust to a few wild cells, as a mean is not."""
    by_row: dict[R, list[tuple[C, float]]] = {}
    by_column: dict[C, list[tuple[R, float]]] = {}
    for row, column, value in cells:
        by_row.setdefault(row, []).append((column, value))
        by_column.setdefault(column, []).append((row, value))
    if not by_row:
        return {}, {}

    def effects(level: dict[R, float]) -> dict[C, float]:
        return {c: median(v - level[r] for r, v in pairs) for c, pairs in by_column.items()}

    level: dict[R, float] = dict.fromkeys(by_row, 0.0)
    for _round in range(_POLISH_ROUNDS):
        effect = effects(level)
        raw = {r: median(v - effect[c] for c, v in pairs) for r, pairs in by_row.items()}
        centre = median(raw.values())
        level = {r: v - centre for r, v in raw.items()}
    return level, effects(level)


def batch_effects(residuals: Sequence[tuple[Hashable, int, float]]) -> tuple[tuple[float, float], ...]:
    """(log batch, effect) from (series, batch, log ratio): a batch size only some series ran (BatchNorm
    after global pooling cannot train at batch 1) is measured against those series' own level."""
    _level, effect = median_polish(residuals)
    return tuple((log(b), effect[b]) for b in sorted(effect))
