"""Where the advisor keeps its state by default; every path can be overridden on the command line."""

from __future__ import annotations

import os
from importlib import resources
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


def policy() -> Path:
    """`$ADVISOR_POLICY`, else `/etc/advisor/policy.toml`: an admin's file, the same for every user."""
    return Path(os.environ.get("ADVISOR_POLICY", "/etc/advisor/policy.toml"))


def package_data(name: str) -> Path:
    """A file or folder of ``advisor/data``, installed with the package (a wheel has it too)."""
    return Path(str(resources.files("advisor") / "data" / name))


def gpu_specs() -> Path:
    """`$ADVISOR_GPU_SPECS`, else the specification files that ship with the package."""
    return Path(os.environ.get("ADVISOR_GPU_SPECS", package_data("gpu-specs")))


def socket() -> Path:
    """`$ADVISOR_SOCKET`, else where the systemd unit puts it."""
    return Path(os.environ.get("ADVISOR_SOCKET", "/run/advisor/advisor.sock"))
