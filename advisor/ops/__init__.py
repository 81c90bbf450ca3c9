"""The op registry: every op kind the introspection sees (and the loss and the optimizer's update), each
declared once with the layer kinds it covers, its hand-counted FLOPs and bytes, its benchmark configuration,
its torch builder, its features and its kernel path (`advisor.ops.known`).

This namespace is pure (no torch); its workloads (`advisor.ops.workloads`) load torch where an op runs.
"""

from advisor.ops.costs import Cost
from advisor.ops.known import OPS, layer_op, op_named, op_of, profiled_op, timed_groups, timed_kinds
from advisor.ops.op import KernelPath, Op, group_alignment

__all__ = [
    "OPS",
    "Cost",
    "KernelPath",
    "Op",
    "group_alignment",
    "layer_op",
    "op_named",
    "op_of",
    "profiled_op",
    "timed_groups",
    "timed_kinds",
]
