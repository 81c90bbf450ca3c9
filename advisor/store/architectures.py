"""The ``architectures`` table: one row per architecture submitted for advice or measured by hand, by its
layer table's hash (`advisor.bench.architectures` keeps it)."""

from __future__ import annotations

from datetime import datetime

from advisor.frozen import Frozen
from advisor.store.table import Table


class ArchitectureRow(Frozen):
    architecture_hash: str
    model: str
    input_shape: str
    """The input's shape as a JSON list, ``[3, 224, 224]``: compared as text."""
    layer_table: str
    """The `LayerTable`, as JSON."""
    batches: str
    """The global batches it was submitted with, as a sorted JSON list."""
    requests: int
    first_at: datetime
    last_at: datetime


ARCHITECTURES = Table("architectures", ArchitectureRow, "architecture_hash")
