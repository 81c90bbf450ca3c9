"""Turning a model reference into a module on the meta device, without weights and without trusting it.

The daemon passes ``allow_factories=False``: it builds only torchvision classification models and never
imports a user's code. A ``package.module:factory`` reference is honoured only in the user's own process.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from pydantic import JsonValue
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from advisor.introspect.errors import IntrospectionError, summary

_PATCH_LOCK = threading.Lock()
aten = torch.ops.aten
_FILLS = frozenset({aten.uniform_, aten.normal_, aten.fill_, aten.zero_})


def build_model(reference: str, kwargs: Mapping[str, JsonValue], *, allow_factories: bool) -> nn.Module:
    """The model, built on the meta device so that no weights are allocated or loaded."""
    factory = resolve_factory(reference, allow_factories=allow_factories)
    try:
        with torch.device("meta"), _SkipFills():  # type: ignore[no-untyped-call]  # torch leaves it untyped
            model = factory(**kwargs)
    except Exception:
        # Some constructors compute with tensors (RegNet sizes its stages with torch ops, which the meta
        # device cannot answer): build those on the CPU with each parameter moved to meta as it is made.
        try:
            with _parameters_on_meta():
                model = factory(**kwargs)
        except Exception as error:
            raise IntrospectionError(f"building {reference!r} failed: {summary(error)}") from error
    if not isinstance(model, nn.Module):
        raise IntrospectionError(f"{reference!r} returned {type(model).__name__}, not a torch.nn.Module")
    return model.to("meta")


class _SkipFills(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch leaves it untyped
    """Weight initialisers only write values, which a meta tensor has none of; their meta kernels are slow
    Python (half of building resnet50), so a fill of a meta tensor returns it untouched."""

    def __torch_dispatch__(
        self, func: Any, types: Sequence[type], args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        if func.overloadpacket in _FILLS and args[0].is_meta:
            return args[0]
        return func(*args, **(kwargs or {}))


@contextmanager
def _parameters_on_meta() -> Iterator[None]:
    """Patches ``nn.Module.register_parameter`` for the whole process, hence the lock."""
    original = nn.Module.register_parameter

    def register(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        if param is not None:
            param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        original(module, name, param)

    with _PATCH_LOCK:
        nn.Module.register_parameter = register  # type: ignore[method-assign, assignment]
        try:
            yield
        finally:
            nn.Module.register_parameter = original  # type: ignore[method-assign]


def _check(reference: str, *, allow_factories: bool) -> None:
    """Refuse a factory before importing anything: the daemon must never run a user's code."""
    if ":" in reference and not allow_factories:
        raise IntrospectionError(
            f"{reference!r} is a factory reference; only torchvision model names are introspected here "
            "(a factory is introspected in the submitting user's own process)"
        )


def resolve_factory(reference: str, *, allow_factories: bool) -> Callable[..., object]:
    _check(reference, allow_factories=allow_factories)
    if ":" not in reference:
        return _torchvision_builder(reference)
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise IntrospectionError(f"{reference!r} is not of the form package.module:factory")
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as error:
        raise IntrospectionError(f"cannot import module {module_name!r} of {reference!r}: {error}") from error
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as error:
            raise IntrospectionError(
                f"{reference!r}: {module_name} has no attribute {attribute!r}"
            ) from error
    if not callable(target):
        raise IntrospectionError(f"{reference!r} is not callable")
    return target


def _torchvision_builder(name: str) -> Callable[..., object]:
    # Imported here: a factory (advise-submit's child) has no use for torchvision's second of imports.
    import torchvision

    if name not in torchvision.models.list_models(module=torchvision.models):
        raise IntrospectionError(f"{name!r} is not a torchvision classification model")
    builder = torchvision.models.get_model_builder(name)

    def build(**kwargs: object) -> object:
        return builder(weights=None, **kwargs)

    return build
