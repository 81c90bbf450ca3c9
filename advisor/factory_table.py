"""A factory model's layer table, for the callers that run as the user (`advise-submit`, `advisor web`).

A factory (``package.module:factory``) is the user's own code: it is imported and called in a child of the
caller (`advisor.introspect.child`) with a deadline and a memory limit, so whatever it does costs at most
the advice. The daemon imports no user code; it validates the table it is sent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from advisor.jobscript.advisor_words import description_values, names_a_factory
from advisor.jobscript.errors import ScriptError
from advisor.submit_guard import sanitized

TIMEOUT_S = 60
MEMORY_BYTES = 8 * 2**30


class FactoryFailed(RuntimeError):
    """The factory named could not be introspected; the message says why, in one printable line."""


def factory_table(text: str, where: str, description_args: list[str]) -> dict[str, Any] | None:
    """The table of the factory model the script (or the command line) describes; None for a torchvision
    name, which the daemon introspects itself, and for a description the daemon will report, with its
    place."""
    try:
        if not names_a_factory(description_values(text, where, description_args)[0]):
            return None
        from advisor.jobscript.advisor_lines import parse_description

        description = parse_description(text, where, description_args)
    except ScriptError:
        return None
    assert description is not None
    request = {
        "model": description.model,
        "input_shape": description.input_shape,
        "model_kwargs": description.model_kwargs,
        "memory_bytes": MEMORY_BYTES,
    }
    try:
        result = subprocess.run(
            [sys.executable, "-m", "advisor.introspect.child"],
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
