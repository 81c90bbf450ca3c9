"""The ``allreduce`` table: each all-reduce the communication benchmark timed, per partition, size and
spread, with the machine and network it ran on (`advisor.comm.rows` keeps it)."""

from __future__ import annotations

from advisor.store.measurements import CommunicationRow
from advisor.store.table import Table


class AllReduceRow(CommunicationRow):
    bytes: int
    seconds: float
    bus_bytes_s: float


ALLREDUCE = Table("allreduce", AllReduceRow, "key", indexes=("partition",))
