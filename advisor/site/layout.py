"""Which shipped file goes where on a host, and the units' text for the environment they run: pure, so the
layout is one table that the command, the admin guide's test and the units' test read alike."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

SHIPPED_PREFIX = PurePosixPath("/opt/advisor/venv")
"""The environment the shipped units run (the admin guide's); `init-site --prefix` names another."""
CONFIG_DIR = PurePosixPath("/etc/advisor")
"""The units' `ConfigurationDirectory=advisor`: systemd fixes it, as `StateDirectory=` fixes the state's."""
UNIT_DIR = PurePosixPath("/etc/systemd/system")
UNITS = ("advisor.service", "advisor-bench.service", "advisor-bench.timer")
POLICIES = ("README.md", "cost.toml", "default.toml", "sandbox.toml")
SAFE_PREFIX = re.compile(r"/[A-Za-z0-9._+/-]+")
"""What a unit's command line holds unquoted: no space, `%` specifier, `$` variable, quote or `;`."""


@dataclass(frozen=True)
class SiteFile:
    """One file an install needs: where it goes on the host, its text, and what it is, for the admin."""

    path: PurePosixPath
    text: str
    what: str


class PrefixError(ValueError):
    """A prefix the units cannot run: said with the value and why."""


def checked_prefix(text: str) -> PurePosixPath:
    """An absolute, plain path: systemd would read a space, `%` or `$` in `ExecStart=` as something else."""
    path = PurePosixPath(text)
    if not SAFE_PREFIX.fullmatch(text) or ".." in path.parts or str(path) != text.rstrip("/"):
        raise PrefixError(
            f"--prefix {text!r}: an absolute path of letters, digits and . _ + - / only (the units run "
            "PREFIX/bin/advisor unquoted)"
        )
    return path


def site_files(shipped: Callable[[str], str], prefix: PurePosixPath) -> list[SiteFile]:
    """Every file, from `shipped(name)` (a name under the package's `site/files/`), for an environment at
    `prefix`: the units run `prefix/bin/advisor`."""
    files = [
        SiteFile(CONFIG_DIR / "advisor.toml", shipped("advisor.toml"), "the settings (every key commented)"),
        SiteFile(CONFIG_DIR / "policy.toml", shipped("policies/default.toml"), "the policy: edit it"),
        SiteFile(CONFIG_DIR / "constraints.txt", shipped("constraints.txt"), "pip's constraints"),
        SiteFile(CONFIG_DIR / "systemd.md", shipped("systemd/README.md"), "the units, explained"),
    ]
    files += [
        SiteFile(CONFIG_DIR / "policies" / name, shipped(f"policies/{name}"), "a policy to start from")
        for name in POLICIES
    ]
    files += [
        SiteFile(UNIT_DIR / name, unit_text(shipped(f"systemd/{name}"), prefix), "a systemd unit")
        for name in UNITS
    ]
    return files


def unit_text(shipped: str, prefix: PurePosixPath) -> str:
    """The unit running `prefix/bin/advisor` instead of the shipped environment's."""
    return shipped.replace(f"{SHIPPED_PREFIX}/bin/", f"{prefix}/bin/")
