"""The one base of the advisor's plain value types: immutable, and refusing fields they do not declare; and
the way a type gains a field without changing what it stored before."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LaterFields(BaseModel):
    """A type whose ``later_fields`` came after values of it were kept (keys, hashes, files): each is
    written only where it differs from its default, so what was kept before keeps its identity and reads
    back as it was."""

    later_fields: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _without_later_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        for name in self.later_fields:
            if getattr(self, name) == type(self).model_fields[name].default:
                data.pop(name, None)
        return data
