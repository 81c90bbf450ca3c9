"""A measurement's pace step judged by the measurements around it in its run, not only by the run's
median (which training holds it to): a pace step that strays alone is replaced by its neighbours'. Pure."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import median

from advisor.records import ResultLine

NEIGHBOURS = 2
"""Paced measurements on each side that a measurement's pace step is judged against (`held_pace`)."""
STRAY = 1.1
"""How far a measurement's pace step may lie from its neighbours' before it counts as straying alone, and
theirs is taken instead."""


def neighbours_pace(paces: Sequence[float], index: int) -> float | None:
    """The median pace step of the `NEIGHBOURS` paced measurements on each side of the ``index``-th one of
    a run, the window shifted to the run's end where one side has fewer (None: it has none)."""
    start = min(max(index - NEIGHBOURS, 0), max(len(paces) - 2 * NEIGHBOURS - 1, 0))
    window = enumerate(paces[start : start + 2 * NEIGHBOURS + 1], start=start)
    around = [pace for at, pace in window if at != index]
    return median(around) if around else None


def held_pace(own: float, around: float | None) -> float:
    """A measurement's pace step, or its neighbours' (`neighbours_pace`) where it lies beyond `STRAY` of
    theirs: it strayed alone, and theirs is the machine's pace then. Around one first sight's steps at one
    batch it took 35-40 ms against 27-31 around them, the steps themselves their usual time: held to the
    band's edge, their ratios stayed 10% low, replaced, 1% (benchmarks/README.md). A drift of the whole
    CPU moves the neighbours too, and is kept."""
    if around is None or around / STRAY <= own <= around * STRAY:
        return own
    return around


@dataclass
class Neighbours:
    """Hands each paced result to the sink once its neighbours are in (`neighbours_pace`; or the run has
    ended), its pace step held by those around it (`held_pace`); the others at once, in order.
    A killed job loses at most the last few."""

    sink: Callable[[ResultLine], None]
    paces: list[float] = field(default_factory=list)
    waiting: deque[tuple[ResultLine, int | None]] = field(default_factory=deque)

    def add(self, line: ResultLine) -> None:
        pace = line.measurement.pace_s
        self.waiting.append((line, len(self.paces) if pace else None))
        if pace:
            self.paces.append(pace)
        self.write(ended=False)

    def write(self, *, ended: bool) -> None:
        while self.waiting:
            line, index = self.waiting[0]
            if index is not None and not ended and len(self.paces) <= max(index, NEIGHBOURS) + NEIGHBOURS:
                return
            self.waiting.popleft()
            self.sink(line if index is None else _held(line, neighbours_pace(self.paces, index)))


def _held(line: ResultLine, around: float | None) -> ResultLine:
    """The line with its pace step held (`held_pace`), its ratio to it scaled to match."""
    measurement = line.measurement
    own = measurement.pace_s or 0.0
    pace = held_pace(own, around)
    if pace == own:
        return line
    ratio = measurement.pace_ratio * own / pace if measurement.pace_ratio else None
    update = {"pace_s": pace, "pace_ratio": ratio}
    return line.model_copy(update={"measurement": measurement.model_copy(update=update)})
