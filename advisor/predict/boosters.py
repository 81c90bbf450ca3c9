"""xgboost's part of a machine's model: a booster trained on rows, kept as base64 in the model file, and
applied to rows. All xgboost's native code runs here, so what a version file can make it do is in one place
(`advisor.predict.model_check` exercises it once in a child before the daemon trusts a file)."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
import xgboost as xgb

LAYER_PARAMS = {"max_depth": 6, "eta": 0.1, "min_child_weight": 2.0, "subsample": 0.9}
LAYER_ROUNDS = 300
STEP_PARAMS = {"max_depth": 3, "eta": 0.05, "min_child_weight": 2.0, "subsample": 0.9, "lambda": 2.0}
STEP_ROUNDS = 100
_COMMON = {"tree_method": "hist", "objective": "reg:squarederror", "nthread": 1, "seed": 0}


def train_booster(
    params: Mapping[str, float], rounds: int, rows: Sequence[Sequence[float]], y: Sequence[float]
) -> str:
    """The trained booster, encoded for the model file."""
    matrix = xgb.DMatrix(np.asarray(rows, dtype=float), label=np.asarray(y, dtype=float))
    booster = xgb.train({**_COMMON, **params}, matrix, rounds)
    return base64.b64encode(booster.save_raw("ubj")).decode()


@lru_cache(maxsize=64)
def _decoded(encoded: str) -> xgb.Booster:
    """Decoding is the slow part of a prediction; a version's two boosters are decoded once."""
    booster = xgb.Booster(params={"nthread": 1})
    booster.load_model(bytearray(base64.b64decode(encoded)))
    return booster


def apply_booster(encoded: str, rows: Sequence[Sequence[float]]) -> list[float]:
    matrix = xgb.DMatrix(np.asarray(rows, dtype=float).reshape(len(rows), -1))
    return [float(v) for v in _decoded(encoded).predict(matrix)]


def exercise_booster(encoded: str) -> None:
    """Parses the booster and predicts one row of zeros with it."""
    booster = _decoded(encoded)
    booster.predict(xgb.DMatrix(np.zeros((1, booster.num_features()))))


def booster_width(encoded: str) -> int:
    """The number of features the booster reads."""
    return int(_decoded(encoded).num_features())
