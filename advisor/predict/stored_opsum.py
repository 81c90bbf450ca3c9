"""The op sum (`advisor.predict.opsum`) as a machine's model file keeps it beside today's step model: what
its fit adds to the layer part, no more. Its layer part and rates are ``fit_layers`` of the same layer
measurements, which the file already holds as the model's own (`advisor.predict.blend` rebuilds the op sum
on them at load), so they are not stored twice. Mappings keyed by tuples are lists of pairs, as JSON has
no tuple keys."""

from __future__ import annotations

from advisor.frozen import Frozen
from advisor.ops import KernelPath


class StoredOpSum(Frozen):
    coefficients: tuple[float, ...]
    calibration: tuple[tuple[tuple[str, KernelPath, int], float], ...]
    """(op, kernel path, benchmarked batch) and its multiplier (``OpSumModel.calibration``)."""
    booster: str
    own_scales: tuple[tuple[tuple[str, bool, bool], tuple[float, float]], ...]
    """(architecture, amp, channels last) and its fixed and per-sample scales (``OpSumModel.own_scales``)."""
    anchored_scale: float
