"""The feature layout a machine's boosters were fitted with, kept in its model file and compared at load.

A booster reads a row by position: a model fitted before a new op kind (a new step feature) would read
every later column one place off and predict without a word. So a model file records the names of its
boosters' columns, and a file whose names differ from this advisor's is not served until `advisor models
train` fits a new one. Versions from before layouts were kept are judged by their boosters' widths.
"""

from __future__ import annotations

from advisor.frozen import Frozen
from advisor.predict.features import LAYER_FEATURES, step_feature_names

STEP_BASE_COLUMN = "log_base_s"
"""The step booster's last column: the log of the linear base it corrects."""
OP_SUM_COLUMNS = (
    *(f"share_{term}" for term in ("layers", "untimed", "launches", "update", "host_step", "host_sample")),
    "log_sum_s",
    "amp",
    "channels_last",
    "log_parameters",
    "log_layers",
)
"""The op sum's booster's columns (`advisor.predict.opsum.booster_row`): each term's share of the sum
(``OpTerms.columns``), the sum, the settings, the model's size. A term added to the sum adds a column."""


class FeatureLayout(Frozen):
    layer: tuple[str, ...]
    """The layer booster's columns."""
    step: tuple[str, ...]
    """The step booster's columns."""
    op_sum: tuple[str, ...] = ()
    """The op sum's booster's columns; empty in versions from before the op sum was served."""


def current_layout() -> FeatureLayout:
    """This advisor's layout, as the op registry makes it today."""
    return FeatureLayout(
        layer=LAYER_FEATURES, step=(*step_feature_names(), STEP_BASE_COLUMN), op_sum=OP_SUM_COLUMNS
    )


def layout_problem(stored: FeatureLayout, current: FeatureLayout, *, op_sum: bool = True) -> str | None:
    """What differs, in words, or None where nothing does; the op sum's columns only where the model holds
    an op sum (``op_sum``): without one, a file predicts as well as it did."""
    boosters = [("layer", stored.layer, current.layer), ("step", stored.step, current.step)]
    if op_sum:
        boosters.append(("op sum's", stored.op_sum, current.op_sum))
    for booster, mine, now in boosters:
        if mine != now:
            gone = [name for name in mine if name not in now]
            new = [name for name in now if name not in mine]
            detail = f"{len(mine)} columns, this advisor's {len(now)}"
            detail += f"; new here: {', '.join(new)}" if new else ""
            detail += f"; gone from here: {', '.join(gone)}" if gone else ""
            return f"its {booster} booster was fitted with another feature layout ({detail})"
    return None


def width_problem(widths: tuple[int, int], current: FeatureLayout) -> str | None:
    """For a version from before layouts were kept: its boosters' widths against this advisor's."""
    now = (len(current.layer), len(current.step))
    if widths == now:
        return None
    return (
        f"its boosters read {widths[0]} and {widths[1]} features, this advisor's layout has {now[0]} and "
        f"{now[1]} (fitted before model files kept their feature layout)"
    )
