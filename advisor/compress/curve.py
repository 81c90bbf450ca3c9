"""Shared reference-curve compression of a weight matrix (Vatai and Suda, 2018).

Sorted and normalised, nearly every row of a dense layer lies on one curve close to the normal quantile
function. A row is then stored as the position of each weight on that shared curve (small integers) plus a
least-squares scale and, where it lowers the error, a shift. Positions whose curve value lies within
`prune_eps` (in units of the row's RMS) of zero collapse into one exact-zero level, which shrinks the
index range; `index_bits` further merges positions into at most 2**bits levels (1-D k-means on the curve).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]
Indices = npt.NDArray[np.uint32]

_LLOYD_ROUNDS = 25


@dataclass(frozen=True)
class CompressedMatrix:
    """One layer's weights as levels on the shared curve; `indices[i, j]` is weight (i, j)'s level."""

    levels: Floats
    indices: Indices
    scale: Floats
    shift: Floats | None
    normal_r2: float

    @property
    def rows(self) -> int:
        return int(self.indices.shape[0])

    @property
    def cols(self) -> int:
        return int(self.indices.shape[1])

    @property
    def index_bits(self) -> int:
        return bits_for(len(self.levels))

    @property
    def nbytes(self) -> int:
        """What the layer occupies on disk: bit-packed indices, per-row floats and the shared levels."""
        per_row = 4 * self.rows * (1 if self.shift is None else 2)
        return packed_size(self.rows * self.cols, self.index_bits) + per_row + 4 * len(self.levels)

    def weights(self) -> Floats:
        values = self.levels[self.indices] * self.scale[:, None]
        if self.shift is not None:
            values = values + self.shift[:, None]
        return values.astype(np.float32)


def bits_for(levels: int) -> int:
    return max(1, math.ceil(math.log2(max(levels, 1))))


def packed_size(count: int, width: int) -> int:
    return (count * width + 7) // 8


def estimated_nbytes(rows: int, cols: int, index_bits: int | None = None, shifted: bool = True) -> int:
    """A layer's compressed size known from its shape alone: no pruning, every allowed level used."""
    levels = cols if index_bits is None else min(cols, 2**index_bits)
    return packed_size(rows * cols, bits_for(levels)) + 4 * rows * (2 if shifted else 1) + 4 * levels


def compress_matrix(
    weights: npt.ArrayLike, prune_eps: float = 0.0, index_bits: int | None = None
) -> CompressedMatrix:
    """The better of the shifted and unshifted encodings, by relative reconstruction error."""
    matrix = np.asarray(weights, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] < 2:
        raise ValueError(f"need a matrix with at least two columns, got shape {matrix.shape}")
    if prune_eps < 0:
        raise ValueError("prune_eps must be >= 0")
    if index_bits is not None and not 2 <= index_bits <= 32:
        raise ValueError("index_bits must be between 2 and 32")
    plain = _encode(matrix, prune_eps, index_bits, shifted=False)
    shifted = _encode(matrix, prune_eps, index_bits, shifted=True)
    return shifted if relative_error(matrix, shifted) < relative_error(matrix, plain) else plain


def relative_error(original: npt.ArrayLike, compressed: CompressedMatrix) -> float:
    """Frobenius norm of the difference over that of the original."""
    reference = np.asarray(original, dtype=np.float64)
    norm = float(np.linalg.norm(reference))
    difference = float(np.linalg.norm(reference - compressed.weights()))
    return difference / norm if norm > 0 else difference


def reference_curve(matrix: npt.NDArray[np.float64], shifted: bool) -> npt.NDArray[np.float64]:
    """The mean of the sorted rows, each centred (if shifted) and scaled to unit RMS."""
    centred = matrix - matrix.mean(axis=1, keepdims=True) if shifted else matrix
    rms = np.sqrt(np.mean(centred**2, axis=1, keepdims=True))
    normalised = centred / np.where(rms > 0, rms, 1.0)
    return np.asarray(np.sort(normalised, axis=1).mean(axis=0), dtype=np.float64)


def normal_r2(curve: npt.NDArray[np.float64]) -> float:
    """R^2 of the curve against standard normal quantiles: 1 means exactly a (scaled) normal CDF."""
    normal = NormalDist()
    quantiles = np.array([normal.inv_cdf((k + 0.5) / len(curve)) for k in range(len(curve))])
    if np.ptp(curve) == 0:
        return 0.0
    return float(np.corrcoef(curve, quantiles)[0, 1] ** 2)


def ranks(matrix: npt.NDArray[np.float64]) -> Indices:
    """Each weight's position in its sorted row: a permutation of 0..cols-1 per row."""
    order = np.argsort(matrix, axis=1, kind="stable")
    result = np.empty(matrix.shape, dtype=np.uint32)
    np.put_along_axis(result, order, np.arange(matrix.shape[1], dtype=np.uint32)[None, :], axis=1)
    return result


def level_map(
    curve: npt.NDArray[np.float64], prune_eps: float, index_bits: int | None
) -> tuple[Indices, npt.NDArray[np.float64]]:
    """Curve position -> level, and each level's value; levels ascend, a pruned middle is exactly 0."""
    n = len(curve)
    budget = n if index_bits is None else min(n, 2**index_bits)
    pruned = np.abs(curve) < prune_eps
    if not pruned.any() and budget >= n:
        return np.arange(n, dtype=np.uint32), curve.copy()
    low = np.flatnonzero(~pruned & (curve < 0))
    high = np.flatnonzero(~pruned & (curve >= 0))
    nonzero_budget = budget - 1 if pruned.any() else budget
    low_budget = _split_budget(nonzero_budget, len(low), len(high))
    high_budget = nonzero_budget - low_budget
    mapping = np.empty(n, dtype=np.uint32)
    values: list[float] = []
    for positions, count in ((low, low_budget), (None, 0), (high, high_budget)):
        if positions is None:
            if pruned.any():
                mapping[pruned] = len(values)
                values.append(0.0)
            continue
        for group_values, group in _cluster(curve[positions], count):
            mapping[positions[group]] = len(values)
            values.append(group_values)
    return mapping, np.asarray(values, dtype=np.float64)


def _split_budget(budget: int, low: int, high: int) -> int:
    if low == 0 or high == 0:
        return budget if low else 0
    share = round(budget * low / (low + high))
    return min(low, max(1, min(share, budget - 1)))


def _cluster(values: npt.NDArray[np.float64], count: int) -> list[tuple[float, npt.NDArray[np.intp]]]:
    """Contiguous groups of sorted values, by 1-D k-means started from equal-count groups."""
    if len(values) == 0 or count <= 0:
        return []
    if count >= len(values):
        return [(float(value), np.array([i])) for i, value in enumerate(values)]
    centres = np.array([group.mean() for group in np.array_split(values, count)])
    for _ in range(_LLOYD_ROUNDS):
        labels = np.searchsorted((centres[1:] + centres[:-1]) / 2, values)
        updated = np.array(
            [values[labels == k].mean() if (labels == k).any() else centres[k] for k in range(count)]
        )
        if np.allclose(updated, centres):
            break
        centres = np.sort(updated)
    labels = np.searchsorted((centres[1:] + centres[:-1]) / 2, values)
    groups = [np.flatnonzero(labels == k) for k in range(count)]
    return [(float(values[group].mean()), group) for group in groups if len(group)]


def _encode(
    matrix: npt.NDArray[np.float64], prune_eps: float, index_bits: int | None, shifted: bool
) -> CompressedMatrix:
    curve = reference_curve(matrix, shifted)
    mapping, values = level_map(curve, prune_eps, index_bits)
    indices = mapping[ranks(matrix)]
    on_curve = values[indices]
    if shifted:
        mean_v = on_curve.mean(axis=1, keepdims=True)
        mean_w = matrix.mean(axis=1, keepdims=True)
        spread = np.sum((on_curve - mean_v) ** 2, axis=1)
        scale = np.sum((on_curve - mean_v) * (matrix - mean_w), axis=1) / np.where(spread > 0, spread, 1.0)
        shift: Floats | None = (mean_w[:, 0] - scale * mean_v[:, 0]).astype(np.float32)
    else:
        power = np.sum(on_curve**2, axis=1)
        scale = np.sum(on_curve * matrix, axis=1) / np.where(power > 0, power, 1.0)
        shift = None
    return CompressedMatrix(
        levels=values.astype(np.float32),
        indices=indices,
        scale=scale.astype(np.float32),
        shift=shift,
        normal_r2=normal_r2(curve),
    )
