"""The one error introspection raises, so callers (daemon, client, CLI) catch a single type."""

from __future__ import annotations


class IntrospectionError(ValueError):
    """A model reference, its arguments or the input shape cannot give a layer table; the message says why."""
