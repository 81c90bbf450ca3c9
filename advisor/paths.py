"""Where the advisor keeps its state by default; every path can be overridden on the command line."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """`$ADVISOR_STATE_DIR`, else the XDG state folder of the user running the command."""
    if "ADVISOR_STATE_DIR" in os.environ:
        return Path(os.environ["ADVISOR_STATE_DIR"])
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "advisor"


def database() -> Path:
    return Path(os.environ.get("ADVISOR_DB", state_dir() / "advisor.db"))


def sandbox_dir() -> Path:
    return Path(os.environ.get("ADVISOR_SANDBOX_DIR", state_dir() / "sandbox"))
