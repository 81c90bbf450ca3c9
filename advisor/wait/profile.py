"""Free resources per node over time: the reservation table a backfill pass plans against.

Times are seconds from the simulation's start; each node's free GPUs, CPUs and memory are a step
function held in parallel lists (segment ``i`` runs from ``times[i]`` to ``times[i + 1]``, the last one
forever), so a lookup walks only the few changes on that node.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

INF = math.inf

#: (GPUs, CPUs, memory MB)
Amount = tuple[int, int, int]


class Profile:
    def __init__(
        self, capacities: Sequence[Amount], start: float, held: Sequence[Sequence[tuple[float, Amount]]]
    ) -> None:
        """A table from ``start`` on, each node holding its ``held`` amounts until their end times."""
        self._start = start
        self._times: list[list[float]] = []
        self._gpus: list[list[int]] = []
        self._cpus: list[list[int]] = []
        self._memory: list[list[int]] = []
        for (gpus, cpus, memory), holdings in zip(capacities, held, strict=True):
            for _, (used_gpus, used_cpus, used_memory) in holdings:
                gpus, cpus, memory = gpus - used_gpus, cpus - used_cpus, memory - used_memory
            times, free_gpus, free_cpus, free_memory = [start], [gpus], [cpus], [memory]
            for end, (used_gpus, used_cpus, used_memory) in sorted(holdings, key=_end):
                if end == INF:
                    break
                if end > times[-1]:
                    times.append(end)
                    free_gpus.append(free_gpus[-1])
                    free_cpus.append(free_cpus[-1])
                    free_memory.append(free_memory[-1])
                free_gpus[-1] += used_gpus
                free_cpus[-1] += used_cpus
                free_memory[-1] += used_memory
            self._times.append(times)
            self._gpus.append(free_gpus)
            self._cpus.append(free_cpus)
            self._memory.append(free_memory)

    def reserve(self, node: int, begin: float, end: float, amount: Amount) -> None:
        """Take ``amount`` on ``node`` from ``begin`` until ``end`` (which may be INF)."""
        first = self._split(node, begin)
        last = self._split(node, end) if end < INF else len(self._times[node])
        gpus, cpus, memory = amount
        free_gpus, free_cpus, free_memory = self._gpus[node], self._cpus[node], self._memory[node]
        for index in range(first, last):
            free_gpus[index] -= gpus
            free_cpus[index] -= cpus
            free_memory[index] -= memory

    def free(self, node: int, at: float) -> Amount:
        """What ``node`` has free at ``at`` (not before the table's start)."""
        index = bisect_right(self._times[node], at) - 1
        return self._gpus[node][index], self._cpus[node][index], self._memory[node][index]

    def earliest(self, node: int, amount: Amount, duration: float, after: float, latest: float) -> float:
        """First start in [after, latest] at which ``amount`` stays free for ``duration``; INF if none."""
        times = self._times[node]
        free_gpus, free_cpus, free_memory = self._gpus[node], self._cpus[node], self._memory[node]
        gpus, cpus, memory = amount
        last = len(times) - 1
        start = after if after > self._start else self._start
        index = bisect_right(times, start) - 1
        while start <= latest:
            if free_gpus[index] < gpus or free_cpus[index] < cpus or free_memory[index] < memory:
                if index == last:
                    return INF
                start = times[index + 1]
            elif index == last or times[index + 1] >= start + duration:
                return start
            index += 1
        return INF

    def earliest_on(
        self,
        nodes: Sequence[int],
        count: int,
        amount: Amount,
        duration: float,
        floors: list[float],
        latest: float,
    ) -> tuple[float, list[int]]:
        """First start at which ``count`` of ``nodes`` all fit, and those nodes (the first in order).

        ``floors[node]`` is a time before which nothing fits on that node; the search begins there and
        raises it to what it finds.
        """
        if count == 1:
            # Nodes by how soon they might fit; once a node's floor is past the best start, all are.
            best, chosen = latest, -1
            for node in sorted(nodes, key=floors.__getitem__):
                if floors[node] > best:
                    break
                start = self.earliest(node, amount, duration, floors[node], best)
                if start == INF:
                    floors[node] = best
                    continue
                floors[node] = start
                if start < best or chosen < 0 or node < chosen:
                    best, chosen = start, node
            return (best, [chosen]) if chosen >= 0 else (INF, [])
        if len(nodes) < count:
            return INF, []
        starts = [
            self.earliest(node, amount, duration, floors[node], latest) if floors[node] <= latest else INF
            for node in nodes
        ]
        for node, start in zip(nodes, starts, strict=True):
            floors[node] = start if start < INF else max(floors[node], latest)
        while (start := sorted(starts)[count - 1]) <= latest and start < INF:
            # No ``count`` nodes fit before the count-th earliest start; look again from there.
            for position, node in enumerate(nodes):
                if starts[position] < start:
                    starts[position] = self.earliest(node, amount, duration, start, latest)
            fitting = [node for node, at in zip(nodes, starts, strict=True) if at == start]
            if len(fitting) >= count:
                return start, fitting[:count]
        return INF, []

    def _split(self, node: int, at: float) -> int:
        """Index of the segment starting at ``at``, cutting the one that spans it if needed."""
        times = self._times[node]
        index = bisect_left(times, at)
        if index < len(times) and times[index] == at:
            return index
        times.insert(index, at)
        for values in (self._gpus[node], self._cpus[node], self._memory[node]):
            values.insert(index, values[index - 1])
        return index


def _end(holding: tuple[float, Amount]) -> float:
    return holding[0]
