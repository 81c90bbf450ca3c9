"""The communication measurements in the advisor's database, and each partition's `Communication`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from advisor.comm.lines import AllReduceLine, WholeStepLine
from advisor.comm.sync import AllReduceSample, Communication, Spread, WholeStep, communication
from advisor.store import ALLREDUCE, WHOLE_STEPS, AllReduceRow, Store, WholeStepRow


class CommunicationRows:
    """All-reduces (latency and bus bandwidth per size and spread) and whole data-parallel steps, per
    partition, with the machine and the network they were measured on; ingesting twice stores once."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def ingest(self, lines: Iterable[AllReduceLine | WholeStepLine]) -> int:
        count = 0
        with self.store.db.conn:
            for line in lines:
                if isinstance(line, AllReduceLine):
                    self.store.upsert(ALLREDUCE, _allreduce_row(line))
                else:
                    self.store.upsert(WHOLE_STEPS, _whole_step_row(line))
                count += 1
        return count

    def partitions(self) -> list[str]:
        """Every partition that measured its all-reduce, by name."""
        found = self.store.db.execute(
            "SELECT DISTINCT partition FROM allreduce ORDER BY partition"
        ).fetchall()
        return [row[0] for row in found]

    def by_partition(self, names: Iterable[str]) -> dict[str, Communication]:
        return {name: self.communication(name) for name in names}

    def communication(self, partition: str) -> Communication:
        """What the partition's latest measurement says; the stated default where it has none."""
        rows = self.store.rows(ALLREDUCE, "partition = ?", [partition])
        if not rows:
            return communication([])
        latest = max(row.measured_at for row in rows)
        samples = [_sample(row) for row in rows if row.measured_at == latest]
        same_night = self.store.rows(
            WHOLE_STEPS, "partition = ? AND measured_at = ?", [partition, latest.isoformat()]
        )
        return communication(samples, [_step(row) for row in same_night])


def _where(line: AllReduceLine | WholeStepLine, key: str) -> dict[str, Any]:
    """`CommunicationRow`'s fields of one line; ``key`` is added to what identifies its run and spread."""
    spread = line.spread
    when = line.measured_at.isoformat()
    return {
        "key": f"{line.partition} {line.machine} {line.network} {when} {spread.devices}x{spread.nodes} {key}",
        "partition": line.partition,
        "machine": line.machine,
        "network": line.network,
        "measured_at": line.measured_at,
        "devices": spread.devices,
        "nodes": spread.nodes,
    }


def _allreduce_row(line: AllReduceLine) -> AllReduceRow:
    return AllReduceRow(
        **_where(line, str(line.bytes)),
        bytes=line.bytes,
        seconds=line.seconds,
        bus_bytes_s=line.sample().bus_bytes_s,
    )


def _whole_step_row(line: WholeStepLine) -> WholeStepRow:
    return WholeStepRow(
        **_where(line, f"{line.model} {line.batch} {line.input_size}"),
        model=line.model,
        batch=line.batch,
        input_size=line.input_size,
        gradient_bytes=line.gradient_bytes,
        compute_s=line.compute_s,
        step_s=line.step_s,
    )


def _sample(row: AllReduceRow) -> AllReduceSample:
    spread = Spread(devices=row.devices, nodes=row.nodes)
    return AllReduceSample(spread=spread, bytes=row.bytes, seconds=row.seconds)


def _step(row: WholeStepRow) -> WholeStep:
    return WholeStep(
        spread=Spread(devices=row.devices, nodes=row.nodes),
        gradient_bytes=row.gradient_bytes,
        compute_s=row.compute_s,
        step_s=row.step_s,
    )
