"""Layer-level introspection of a model on the meta device: what a prediction for an unbenchmarked model
is built from.

This package's namespace holds only the pure parts (the table, its totals and the memory estimate), so the
daemon and the pure core can validate and use a table a client sent without importing torch; building a
table is ``advisor.introspect.run.introspect``.
"""

from advisor.introspect.errors import IntrospectionError
from advisor.introspect.memory import MemoryEstimate, Optimizer, estimate_peak_memory
from advisor.introspect.table import BatchCosts, Costs, Layer, LayerKind, LayerTable, Scaling, TensorShape

__all__ = [
    "BatchCosts",
    "Costs",
    "IntrospectionError",
    "Layer",
    "LayerKind",
    "LayerTable",
    "MemoryEstimate",
    "Optimizer",
    "Scaling",
    "TensorShape",
    "estimate_peak_memory",
]
