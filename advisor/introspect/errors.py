"""The one error introspection raises, so callers (daemon, client, CLI) catch a single type."""

from __future__ import annotations


class IntrospectionError(ValueError):
    """A model reference, its arguments or the input shape cannot give a layer table; the message says why."""


def summary(error: BaseException, limit: int = 300) -> str:
    """An exception from torch as one line: its C++ stack trace ("Exception raised from ... frame #0")
    tells a user nothing and would fill their terminal."""
    first = str(error).strip().split("\n", 1)[0]
    text = f"{type(error).__name__}: {first}"
    return text if len(text) <= limit else text[:limit] + "..."
