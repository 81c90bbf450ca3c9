"""A factory model's layer table, for the callers that run as the user (`advise-submit`, `advisor web`).

A factory (``package.module:factory``) is the user's own code: it is imported and called in a child of the
caller (`advisor.introspect.child`) with a deadline and a memory limit, so whatever it does costs at most
the advice. The child starts isolated (``python -I``: no working directory, no ``PYTHONPATH``, no user
site on its path), so a ``json.py`` left in a shared folder cannot stand in for the standard library while
the advisor and torch load; the places the user's own package may come from (their ``PYTHONPATH``, and
the working directory where it holds the factory's package, as ``python -m`` would find it) are added
after those, for the factory's import alone. The daemon imports no user code; it validates the table it is
sent. The cli_filter runs none either: it sends no table, and the daemon advises from the user's history.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from advisor.jobscript.advisor_words import description_values, names_a_factory
from advisor.jobscript.errors import ScriptError
from advisor.submit_guard import sanitized

TIMEOUT_S = 60
MEMORY_BYTES = 8 * 2**30


class FactoryFailed(RuntimeError):
    """The factory named could not be introspected; the message says why, in one printable line."""


def named_factory(text: str, where: str, description_args: list[str]) -> str | None:
    """The ``package.module:factory`` the job description names, else None (a torchvision name, none, or a
    description the daemon will report with its place)."""
    try:
        values = description_values(text, where, description_args)[0]
    except ScriptError:
        return None
    return str(values["model"]) if names_a_factory(values) else None


def factory_table(text: str, where: str, description_args: list[str]) -> dict[str, Any] | None:
    """The table of the factory model the script (or the command line) describes; None for a torchvision
    name, which the daemon introspects itself, and for a description the daemon will report, with its
    place."""
    if named_factory(text, where, description_args) is None:
        return None
    from advisor.jobscript.advisor_lines import parse_description

    try:
        description = parse_description(text, where, description_args)
    except ScriptError:
        return None
    assert description is not None
    request = {
        "model": description.model,
        "input_shape": description.input_shape,
        "model_kwargs": description.model_kwargs,
        "memory_bytes": MEMORY_BYTES,
        "search_path": search_path(description.model, os.environ, Path.cwd()),
    }
    try:
        result = subprocess.run(
            [sys.executable, "-I", "-m", "advisor.introspect.child"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise FactoryFailed(
            f"model {description.model} took over {error.timeout:.0f} s to introspect"
        ) from None
    try:
        if result.returncode == 0:
            table = json.loads(result.stdout)
            if isinstance(table, dict):
                return table
    except ValueError:
        pass
    why = result.stderr.strip().splitlines() or [f"exit status {result.returncode}, no layer table"]
    raise FactoryFailed(f"model {description.model} could not be introspected: {sanitized(why[-1])}")


def search_path(model: str, environ: Mapping[str, str], cwd: Path) -> list[str]:
    """Where the user asked their package be found: each ``PYTHONPATH`` entry, then the working directory
    if the factory's top-level package or module lies there (what ``python -m`` found before)."""
    entries = environ.get("PYTHONPATH", "").split(os.pathsep)
    places = [str(cwd / entry) if not Path(entry).is_absolute() else entry for entry in entries if entry]
    top = model.split(":", 1)[0].split(".", 1)[0]
    if (cwd / top).is_dir() or (cwd / f"{top}.py").is_file():
        places.append(str(cwd))
    return places
