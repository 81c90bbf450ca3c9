"""The ``whole_steps`` table: each data-parallel training step the communication benchmark timed whole, beside
its compute alone (`advisor.comm.rows` keeps it)."""

from __future__ import annotations

from advisor.store.measurements import CommunicationRow
from advisor.store.table import Table


class WholeStepRow(CommunicationRow):
    model: str
    batch: int
    input_size: int
    gradient_bytes: int
    compute_s: float
    step_s: float


WHOLE_STEPS = Table("whole_steps", WholeStepRow, "key", indexes=("partition",))
