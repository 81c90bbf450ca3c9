"""Each table defined once by its row type: what goes in comes out equal, kept as the text SQL compares."""

from __future__ import annotations

import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import pytest

from advisor.frozen import Frozen
from advisor.store import Store
from advisor.store.database import TABLES
from advisor.store.table import Table

AT = datetime(2026, 12, 5, 2, 11, 3, 123456, tzinfo=UTC)
SAMPLES: dict[Any, Any] = {str: "text", int: 7, float: 0.25, bool: True, datetime: AT, Path: Path("/v1.json")}


def sample(row: type[Frozen]) -> Frozen:
    """A row with every field set, optional ones too."""
    values = {}
    for name, field in row.model_fields.items():
        kind = field.annotation
        if get_origin(kind) in (Union, types.UnionType):
            (kind,) = [arg for arg in get_args(kind) if arg is not type(None)]
        values[name] = SAMPLES[kind]
    return row.model_validate(values)


@pytest.mark.parametrize("table", TABLES, ids=[table.name for table in TABLES])
def test_a_row_written_reads_back_equal(table: Table[Any]) -> None:
    store = Store.memory()
    row = sample(table.row)
    store.upsert(table, row)
    assert store.rows(table) == [row]


def test_a_time_is_kept_as_its_iso_text_and_a_flag_as_0_or_1() -> None:
    """What the SQL over these columns compares (``at < ?``, ``active = 1``) is what it compared before."""
    store = Store.memory()
    (table,) = [table for table in TABLES if table.name == "audit"]
    store.upsert(table, sample(table.row))
    at, offered = store.db.execute("SELECT at, offered FROM audit").fetchone()
    assert (at, offered) == (AT.isoformat(), 1)


def test_each_memory_store_is_its_own() -> None:
    first, second = Store.memory(), Store.memory()
    (table,) = [table for table in TABLES if table.name == "architectures"]
    first.upsert(table, sample(table.row))
    assert len(first.rows(table)) == 1 and second.rows(table) == []
    assert set(second.db.table_names()) == {table.name for table in TABLES}
