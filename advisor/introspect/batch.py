"""Per-sample figures from one probe at a batch size no real dimension shares.

The probe runs at ``PROBE_BATCH``, a large prime: on the meta device the batch size costs nothing, and a
dimension divisible by it is the batch, wherever it sits (attention folds it into ``batch * heads``,
``nn.MultiheadAttention`` puts it second). A tensor without such a dimension (a weight, its gradient)
costs the same at every batch size. Batch norm would refuse a probe of one sample in training.
"""

from __future__ import annotations

from collections.abc import Sequence

from advisor.introspect.errors import IntrospectionError
from advisor.introspect.table import Scaling, TensorShape

PROBE_BATCH = 65537


def batch_dims(shape: Sequence[int]) -> list[int]:
    return [i for i, size in enumerate(shape) if size and size % PROBE_BATCH == 0]


def per_sample_shape(shape: Sequence[int]) -> TensorShape:
    dims = batch_dims(shape)
    if len(dims) > 1:
        raise IntrospectionError(f"a tensor of shape {tuple(shape)} grows with the square of the batch")
    if not dims:
        return TensorShape(dims=tuple(shape))
    (dim,) = dims
    return TensorShape(
        dims=tuple(s // PROBE_BATCH if i == dim else s for i, s in enumerate(shape)), batch_dim=dim
    )


def cost(value: int, batched: bool) -> Scaling:
    """A cost measured at the probe batch: all per sample if the op touched the batch, else all fixed."""
    if not batched:
        return Scaling(fixed=value)
    per_sample, remainder = divmod(value, PROBE_BATCH)
    if remainder:
        raise IntrospectionError(f"a cost of {value} at batch {PROBE_BATCH} is not linear in the batch size")
    return Scaling(per_sample=per_sample)
