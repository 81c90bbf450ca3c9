"""What the sandbox needs before it starts: Debian's programs installed, and its ports free on 127.0.0.1."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Mapping

REQUIRED_TOOLS = {
    "munged": "munge",
    "mariadbd": "mariadb-server",
    "mariadb-install-db": "mariadb-server",
    "mariadb": "mariadb-client",
    "slurmdbd": "slurmdbd",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sacctmgr": "slurm-client",
    "sinfo": "slurm-client",
}


def missing_packages() -> list[str]:
    """The Debian packages whose programs are not on the PATH."""
    return sorted({package for tool, package in REQUIRED_TOOLS.items() if shutil.which(tool) is None})


def busy_ports(ports: Mapping[str, int]) -> list[str]:
    """``port (name)`` of each port something already listens on."""
    return [f"{port} ({name})" for name, port in ports.items() if port_open(port)]


def port_open(port: int) -> bool:
    """Whether something listens on ``port`` of 127.0.0.1 (a daemon started, or a port taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0
