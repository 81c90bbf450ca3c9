"""A new op kind for the tests, declared as a registry entry and nowhere else: a max pool timed on the
nightly grid, its seconds a step feature (``log_pooling_s``) of its own."""

from __future__ import annotations

from functools import partial

from advisor.introspect import LayerKind
from advisor.ops import Op
from advisor.ops import configs as op_configs
from advisor.ops import costs as op_costs

TIMED_POOL = Op(
    "max_pool2d",
    "vector",
    frozenset({LayerKind.POOLING}),
    op_costs.pooling,
    "advisor.ops.workloads:pooling",
    config=partial(op_configs.pooling, "max_pool2d"),
    timed=True,
    group="pooling",
)
