"""The saving shared-curve compression would give a model's dense layers, from its layer table alone.

`advisor inspect` builds models on the meta device, so there are no weights: the figures assume no
pruning (pruning only shrinks them further) and a per-row shift, the usual choice.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from advisor import readable
from advisor.compress.curve import estimated_nbytes
from advisor.introspect.table import LayerKind, LayerTable

INDEX_BITS: tuple[int | None, ...] = (None, 5, 4)


@dataclass(frozen=True)
class DenseSaving:
    name: str
    rows: int
    cols: int

    @property
    def bytes_before(self) -> int:
        return 4 * self.rows * self.cols

    def bytes_after(self, index_bits: int | None) -> int:
        return estimated_nbytes(self.rows, self.cols, index_bits)


def dense_layers(table: LayerTable) -> list[DenseSaving]:
    """Each nn.Linear once (a layer called twice shares its weights); bare matmuls own no weights."""
    found: dict[str, DenseSaving] = {}
    for layer in table.layers:
        if layer.kind is not LayerKind.LINEAR or not layer.inputs or not layer.outputs:
            continue
        cols, rows = layer.inputs[0].dims[-1], layer.outputs[0].dims[-1]
        if cols >= 2 and layer.parameters >= rows * cols:
            found.setdefault(layer.name, DenseSaving(layer.name, rows, cols))
    return list(found.values())


def render_savings(table: LayerTable, console: Console) -> None:
    layers = dense_layers(table)
    if not layers:
        return
    rows = Table(title="dense-layer weights under `advisor compress` (no pruning)", title_justify="left")
    rows.add_column("layer")
    rows.add_column("shape", justify="right")
    rows.add_column("float32", justify="right")
    for bits in INDEX_BITS:
        rows.add_column("full index" if bits is None else f"{bits}-bit index", justify="right")
    for layer in [*layers, None]:
        name, shape = ("total", "") if layer is None else (layer.name, f"{layer.rows}x{layer.cols}")
        members = layers if layer is None else [layer]
        before = sum(member.bytes_before for member in members)
        cells = []
        for bits in INDEX_BITS:
            after = sum(member.bytes_after(bits) for member in members)
            cells.append(f"{readable.size(after)} ({before / after:.1f}x)")
        rows.add_row(name, shape, readable.size(before), *cells)
    console.print(rows)
