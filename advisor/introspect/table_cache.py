"""Layer tables of torchvision models kept on disk between processes.

Introspecting a zoo model costs a CPU a fraction of a second per input size, and the same tables are built
again by every night's plan on every partition, by each GPU check and by a new machine's first night. A
table is found again only under the same reference, arguments and input shape, the same torch and
torchvision, and the same introspection code (the digest of this package's sources). A factory's table is
never kept: its code is the user's and may change under the same name. A file that does not validate is
introspected again, and a folder that cannot be written only costs the time.

No torch here: the advisor's commands name the folder at start-up without importing it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import cache
from importlib import metadata
from pathlib import Path

from pydantic import ValidationError

from advisor.introspect.table import LayerTable

_PACKAGE = Path(__file__).resolve().parent
_SOURCES = (*sorted(_PACKAGE.glob("*.py")), _PACKAGE.parent / "precision.py", _PACKAGE.parent / "frozen.py")
"""What a table is computed by: this package and the two modules it imports from outside it."""
_folder: Path | None = None


def keep_tables_in(folder: Path | None) -> None:
    """Where this process keeps torchvision models' layer tables (None: nowhere); called once at start-up
    by each command, as torch.hub's ``set_dir`` is."""
    global _folder
    _folder = folder


def table_folder() -> Path | None:
    return _folder


def table_key(reference: str, kwargs_json: str, input_shape: tuple[int, int, int]) -> str:
    """The file name of a table: a digest of everything that made it."""
    made_by = {
        "reference": reference,
        "kwargs": kwargs_json,
        "input_shape": list(input_shape),
        "code": _code_digest(),
        "torch": _version("torch"),
        "torchvision": _version("torchvision"),
    }
    return hashlib.sha256(json.dumps(made_by, sort_keys=True).encode()).hexdigest()


def read_table(folder: Path, key: str) -> LayerTable | None:
    """The kept table, or None where there is none or it does not validate (it is then built again)."""
    try:
        return LayerTable.model_validate_json((folder / f"{key}.json").read_bytes())
    except (OSError, ValueError, ValidationError):
        return None


def write_table(folder: Path, key: str, table: LayerTable) -> None:
    """Written whole or not at all (a temporary file renamed), so a reader never sees half a table."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".table-", suffix=".json")
    except OSError:
        return
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(table.model_dump_json())
        Path(temporary).replace(folder / f"{key}.json")
    except OSError:
        Path(temporary).unlink(missing_ok=True)


@cache
def _code_digest() -> str:
    digest = hashlib.sha256()
    for path in _SOURCES:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@cache
def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "none"
