"""The communication measurements in the advisor's database, and each partition's `Communication`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from advisor.comm.lines import AllReduceLine, WholeStepLine
from advisor.comm.sync import AllReduceSample, Communication, Spread, WholeStep, communication
from advisor.store import Store

_COMMON = {
    "key": str,
    "partition": str,
    "machine": str,
    "network": str,
    "measured_at": str,
    "devices": int,
    "nodes": int,
}
_ALLREDUCE_COLUMNS = {**_COMMON, "bytes": int, "seconds": float, "bus_bytes_s": float}
_WHOLE_STEP_COLUMNS = {
    **_COMMON,
    "model": str,
    "batch": int,
    "input_size": int,
    "gradient_bytes": int,
    "compute_s": float,
    "step_s": float,
}


class CommunicationRows:
    """All-reduces (latency and bus bandwidth per size and spread) and whole data-parallel steps, per
    partition, with the machine and the network they were measured on; ingesting twice stores once."""

    def __init__(self, store: Store) -> None:
        self.db = store.db
        for name, columns in (("allreduce", _ALLREDUCE_COLUMNS), ("whole_steps", _WHOLE_STEP_COLUMNS)):
            table = self.db.table(name)
            if not table.exists():  # a read, so the daemon's requests never wait on a writer's lock
                table.create(columns, pk="key", if_not_exists=True)
                table.create_index(["partition"], if_not_exists=True)

    def ingest(self, lines: Iterable[AllReduceLine | WholeStepLine]) -> int:
        count = 0
        with self.db.conn:
            for line in lines:
                common = _common(line)
                if isinstance(line, AllReduceLine):
                    sample = line.sample()
                    extra: dict[str, Any] = {
                        "bytes": line.bytes,
                        "seconds": line.seconds,
                        "bus_bytes_s": sample.bus_bytes_s,
                    }
                    self.db.table("allreduce").upsert({**common, **extra}, pk="key")
                else:
                    fields = ("model", "batch", "input_size", "gradient_bytes", "compute_s", "step_s")
                    row = {**common, **{name: getattr(line, name) for name in fields}}
                    row["key"] += f" {line.model} {line.batch} {line.input_size}"
                    self.db.table("whole_steps").upsert(row, pk="key")
                count += 1
        return count

    def partitions(self) -> list[str]:
        """Every partition that measured its all-reduce, by name."""
        found = self.db.execute("SELECT DISTINCT partition FROM allreduce ORDER BY partition").fetchall()
        return [row[0] for row in found]

    def by_partition(self, names: Iterable[str]) -> dict[str, Communication]:
        return {name: self.communication(name) for name in names}

    def communication(self, partition: str) -> Communication:
        """What the partition's latest measurement says; the stated default where it has none."""
        rows = list(self.db.table("allreduce").rows_where("partition = ?", [partition]))
        if not rows:
            return communication([])
        latest = max(row["measured_at"] for row in rows)
        samples = [_sample(row) for row in rows if row["measured_at"] == latest]
        same_night = self.db.table("whole_steps").rows_where(
            "partition = ? AND measured_at = ?", [partition, latest]
        )
        return communication(samples, [_step(row) for row in same_night])


def _common(line: AllReduceLine | WholeStepLine) -> dict[str, Any]:
    when = line.measured_at.isoformat()
    spread = line.spread
    key = f"{line.partition} {line.machine} {line.network} {when} {spread.devices}x{spread.nodes}"
    if isinstance(line, AllReduceLine):
        key += f" {line.bytes}"
    return {
        "key": key,
        "partition": line.partition,
        "machine": line.machine,
        "network": line.network,
        "measured_at": when,
        "devices": spread.devices,
        "nodes": spread.nodes,
    }


def _sample(row: dict[str, Any]) -> AllReduceSample:
    spread = Spread(devices=row["devices"], nodes=row["nodes"])
    return AllReduceSample(spread=spread, bytes=row["bytes"], seconds=row["seconds"])


def _step(row: dict[str, Any]) -> WholeStep:
    return WholeStep(
        spread=Spread(devices=row["devices"], nodes=row["nodes"]),
        gradient_bytes=row["gradient_bytes"],
        compute_s=row["compute_s"],
        step_s=row["step_s"],
    )
