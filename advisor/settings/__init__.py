"""The advisor's settings: where its socket, database, policy and models live, how long callers wait for the
daemon, and how the daemon reaches Slurm.

Read once per process, each source over the last: the built-in defaults; the settings file (``--config
FILE``, else ``$ADVISOR_CONFIG``, else ``/etc/advisor/advisor.toml`` where it exists; every key is documented
in ``etc/advisor.toml``); the ``ADVISOR_*`` variables; a command's own options. This package is the one
place that reads the advisor's own variables (``advisor.contract``'s are the job's, not the advisor's).

`load_settings` validates everything with pydantic (the types are in `advisor.settings.validated`);
`caller_settings` is what advise-submit needs before it can ask the daemon, on the standard library alone
while no file is in use: its start-up is every job's overhead.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from advisor.settings.validated import Settings

DEFAULT_FILE = Path("/etc/advisor/advisor.toml")
CONFIG_VARIABLE = "ADVISOR_CONFIG"
DEFAULT_SOCKET = Path("/run/advisor/advisor.sock")
DEFAULT_TIMEOUT_S = 2.0
MAX_TIMEOUT_S = 3600.0
DEFAULT_DAEMON_USER = "advisor"
VARIABLES = {
    "ADVISOR_STATE_DIR": "state_dir",
    "ADVISOR_DB": "database",
    "ADVISOR_SANDBOX_DIR": "sandbox_dir",
    "ADVISOR_SANDBOX_CONFIG": "sandbox_config",
    "ADVISOR_SOCKET": "socket",
    "ADVISOR_POLICY": "policy",
    "ADVISOR_GPU_SPECS": "gpu_specs",
    "ADVISOR_TIMEOUT": "timeout_s",
    "ADVISOR_DAEMON_USER": "daemon_user",
    "ADVISOR_ALLOW_ROOT": "allow_root",
    "ADVISOR_ADMINS": "admins",
    "ADVISOR_METRICS_LISTEN": "metrics_listen",
    "ADVISOR_SERVICE": "service",
    "ADVISOR_SERVICE_LISTEN": "service_listen",
    "ADVISOR_MUNGE_SOCKET": "munge_socket",
}
"""The variables that override a key of the file, each one key."""


class SettingsError(ValueError):
    """Settings that cannot be used: ``FILE:LINE: key: what is wrong``, or the variable that is wrong."""


def package_data(name: str) -> Path:
    """A file or folder of ``advisor/data``, installed with the package (a wheel has it too)."""
    from importlib import resources  # here: it loads tempfile, shutil, bz2... (every sbatch runs the filter)

    return Path(str(resources.files("advisor") / "data" / name))


def settings_file(environ: Mapping[str, str], config: Path | None = None) -> Path | None:
    """The file in use: the one named (which must then exist), else the default where it exists."""
    named = config or (Path(environ[CONFIG_VARIABLE]) if environ.get(CONFIG_VARIABLE) else None)
    if named is not None:
        return named
    return DEFAULT_FILE if DEFAULT_FILE.exists() else None


def load_settings(environ: Mapping[str, str], config: Path | None = None) -> Settings:
    """Every setting, validated; raises `SettingsError` naming the file's line or the variable."""
    from advisor.settings.validated import load

    return load(environ, settings_file(environ, config))


class CallerSettings(NamedTuple):
    """What a caller needs to ask the daemon.
    (A NamedTuple, as every record on plain sbatch's cli_filter path: a dataclass loads `inspect`, 7 ms.)"""

    socket: Path
    timeout_s: float
    daemon_user: str
    service: tuple[str, int] | None = None
    """The cluster-wide service, which replaces the socket where it is set."""
    munge_socket: Path | None = None


def caller_settings(environ: Mapping[str, str]) -> CallerSettings:
    """What advise-submit needs; the whole `load_settings` where a file is in use."""
    if settings_file(environ) is not None:
        settings = load_settings(environ)
        return CallerSettings(
            settings.socket, settings.timeout_s, settings.daemon_user, settings.service, settings.munge_socket
        )
    timeout = environ.get("ADVISOR_TIMEOUT", "").strip()
    service_text = environ.get("ADVISOR_SERVICE", "").strip()
    munge_socket = environ.get("ADVISOR_MUNGE_SOCKET", "").strip()
    return CallerSettings(
        Path(environ.get("ADVISOR_SOCKET", "").strip() or DEFAULT_SOCKET),
        _seconds("ADVISOR_TIMEOUT", timeout) if timeout else DEFAULT_TIMEOUT_S,
        environ.get("ADVISOR_DAEMON_USER", "").strip() or DEFAULT_DAEMON_USER,
        address(service_text, "ADVISOR_SERVICE") if service_text else None,
        Path(munge_socket) if munge_socket else None,
    )


def address(text: str, where: str | None = None) -> tuple[str, int]:
    """``HOST:PORT`` as a host and a port; ``where`` names the variable in the error."""
    host, _, port = text.rpartition(":")
    if (
        not host
        or ":" in host
        or any(c.isspace() for c in host)
        or not port.isdigit()
        or not 0 < int(port) < 65536
    ):
        raise SettingsError(f"{where + ': ' if where else ''}{text!r} is not HOST:PORT")
    return host, int(port)


def _seconds(variable: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SettingsError(f"environment: {variable}: {text!r} is not a number of seconds") from None
    if not 0 < value <= MAX_TIMEOUT_S:
        raise SettingsError(f"environment: {variable}: {text!r} is not between 0 and {MAX_TIMEOUT_S:g} s")
    return value
