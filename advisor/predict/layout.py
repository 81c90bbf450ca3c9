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


class FeatureLayout(Frozen):
    layer: tuple[str, ...]
    """The layer booster's columns."""
    step: tuple[str, ...]
    """The step booster's columns."""


def current_layout() -> FeatureLayout:
    """This advisor's layout, as the op registry makes it today."""
    return FeatureLayout(layer=LAYER_FEATURES, step=(*step_feature_names(), STEP_BASE_COLUMN))


def layout_problem(stored: FeatureLayout, current: FeatureLayout) -> str | None:
    """What differs, in words, or None where nothing does."""
    for booster, mine, now in (("layer", stored.layer, current.layer), ("step", stored.step, current.step)):
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
