"""Least squares on relative error with non-negative coefficients, pure: the layer base, the step base and
the replay's runtime line are all fitted so."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_TINY = 1e-9
_SHRINKAGE = 0.5
"""How hard shrunk coefficients are pulled together: a unit of difference, times the column's largest
share of a sample, weighs this much against one sample's squared relative error (on the CPU zoo's held-out
batch sizes, 0.3 and 1 did as well)."""


def relative_least_squares(
    terms: Sequence[Sequence[float]],
    seconds: Sequence[float],
    *,
    shrunk: int = 0,
    offset: Sequence[float] = (),
) -> tuple[float, ...]:
    """Non-negative coefficients of ``terms`` that fit ``seconds`` by least squares on relative error: a 10%
    miss on a fast layer or step matters as much as on a slow one. Columns are scaled for the solver. The
    first ``shrunk`` columns' coefficients are pulled toward one shared coefficient, appended last: where
    the samples say little about a column, it keeps the shared value (``_SHRINKAGE``). ``offset``: each
    sample's seconds already priced at a fixed scale, which the coefficients fit on top of."""
    # Imported here: only fitting needs scipy.optimize, and every process that loads a model would import it.
    from scipy.optimize import nnls  # type: ignore[import-untyped]

    matrix = np.asarray(terms, dtype=float)
    scale = np.maximum(matrix.max(axis=0), _TINY)
    target = np.asarray(seconds, dtype=float)
    rows = matrix / scale / target[:, None]
    wanted = 1.0 - np.asarray(offset, dtype=float) / target if len(offset) else np.ones(len(target))
    if shrunk:
        pull = np.zeros((shrunk, rows.shape[1] + 1))
        pull[range(shrunk), range(shrunk)] = 1.0
        pull[:, -1] = -scale[:shrunk]
        rows = np.vstack([np.hstack([rows, np.zeros((len(rows), 1))]), np.sqrt(_SHRINKAGE) * pull])
        wanted = np.concatenate([wanted, np.zeros(shrunk)])
        scale = np.append(scale, 1.0)
    solution, _residual = nnls(rows, wanted)
    return tuple(float(v) for v in solution / scale)
