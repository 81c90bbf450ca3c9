"""One table of the database, defined once: its name, its frozen row type (whose fields are its columns),
its key and its indexes. `Store` creates it from this, and rows go in and come out as that type only, so a
column's name and type are checked where they are used, not found missing at run time."""

from __future__ import annotations

import functools
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, TypeVar, Union, get_args, get_origin

from pydantic import TypeAdapter

from advisor.frozen import Frozen

R = TypeVar("R", bound=Frozen)

_COLUMN_TYPES: dict[Any, type] = {bool: int, int: int, float: float, str: str, datetime: str, Path: str}
"""How a field is kept: a flag as 0/1, a time as its ISO text (ordered as text), a path as its text."""


@dataclass(frozen=True)
class Table(Generic[R]):
    name: str
    row: type[R]
    key: str | tuple[str, ...]
    indexes: tuple[str, ...] = ()

    def columns(self) -> dict[str, type]:
        return {name: _column_type(field.annotation) for name, field in self.row.model_fields.items()}

    def values(self, row: R) -> dict[str, Any]:
        """``row`` as the column values SQLite keeps."""
        return {name: _stored(value) for name, value in row.model_dump().items()}

    def select(self) -> str:
        """Its columns, for a SELECT: a column this advisor does not know is never read."""
        return ", ".join(f"[{name}]" for name in self.row.model_fields)

    def parse(self, found: Iterable[Mapping[str, Any]]) -> list[R]:
        """Rows read back, validated as one list (a row at a time costs twice as much)."""
        return _adapter(self.row).validate_python(list(found))


@functools.cache
def _adapter(row: type[R]) -> TypeAdapter[list[R]]:
    return TypeAdapter(list[row])  # type: ignore[valid-type]


def _column_type(annotation: Any) -> type:
    if get_origin(annotation) in (Union, types.UnionType):
        (annotation,) = [arg for arg in get_args(annotation) if arg is not type(None)]
    return _COLUMN_TYPES[annotation]


def _stored(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    return value
