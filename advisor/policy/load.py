"""Read a policy file and say exactly where it is wrong (`advisor.tomlfile` places every problem)."""

from __future__ import annotations

from pathlib import Path

from advisor.policy.schema import Policy
from advisor.tomlfile import Loc, TomlFileError, load_model, parse_model

_NAMES = {
    "partitions": "a partition name (letters, digits, '_', '.', '-')",
    "accounts": "an account name (lower-case letters, digits, '_', '.', '-'; Slurm lower-cases them)",
    "users": "a user name (letters, digits, '_', '.', '@', '-')",
}


class PolicyError(TomlFileError):
    """A policy that cannot be used; one line per problem, each as ``FILE:LINE: key: what is wrong``."""


def load_policy(path: Path) -> Policy:
    return load_model(path, Policy, PolicyError, _name)


def parse_policy(text: str, source: str) -> Policy:
    """``source`` names the text in messages (a path, or ``<stdin>``)."""
    return parse_model(text, source, Policy, PolicyError, _name)


def _name(loc: Loc) -> str:
    """A key of ``[partitions]``, ``[accounts]`` or ``[users]``, or a partition name in a list."""
    return _NAMES[str(loc[0]) if "[key]" in loc else "partitions"]
