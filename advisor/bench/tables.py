"""The layer tables of the benchmark's models, built on the meta device as the benchmark builds them: an
edge (torch loads here, through `advisor.introspect.run`), apart from the zoo's list (`advisor.bench.zoo`),
which the pure core reads."""

from __future__ import annotations

from advisor.bench.zoo import zoo_model, zoo_sized
from advisor.introspect import LayerTable


def zoo_table(model: str, input_size: int) -> LayerTable:
    """The layer table of a zoo model, built exactly as the benchmark builds the model (on the meta device:
    torch loads here, not where the zoo is only listed)."""
    from advisor.introspect.run import introspect

    if zoo_model(model).reference is not None:
        from advisor.bench.sequence import family_table

        return family_table(model, input_size)
    kwargs = zoo_model(model).kwargs(input_size)
    return introspect(model, (3, input_size, input_size), kwargs, allow_factories=False)


def model_table(model: str, input_size: int, *, allow_factories: bool = False) -> LayerTable:
    """The layer table of the network a step of ``model`` trains: a zoo model's as the zoo builds it, any
    other model's (a torchvision name; a factory only in the caller's own process) with its defaults."""
    if zoo_sized(model, input_size) is not None:
        return zoo_table(model, input_size)
    from advisor.introspect.run import introspect

    return introspect(model, (3, input_size, input_size), {}, allow_factories=allow_factories)
