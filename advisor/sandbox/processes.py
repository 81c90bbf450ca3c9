"""Starting, recognising and stopping the sandbox's own daemons, by pid and nothing else."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

MARKER = "ADVISOR_SANDBOX"
"""Set in every daemon's environment to the sandbox folder, so a pid is only ever ours if it carries it."""


def spawn(
    argv: Sequence[str],
    *,
    root: Path,
    log: Path,
    env: Mapping[str, str],
    preexec: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a daemon in the foreground of its own session, detached from the caller's terminal;
    ``preexec`` runs in the child just before the exec (joining a cgroup).

    Until the child has exec'd, /proc shows the caller's environment, so `is_ours` cannot yet see the
    marker: watch start-up through the returned Popen instead.
    """
    with log.open("ab") as out:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **env, MARKER: str(root)},
            # Only a cgroup write, in the child before its exec: nothing a forked thread could hold.
            preexec_fn=preexec,
        )
    return process


def is_ours(pid: int, root: Path) -> bool:
    """True while `pid` is alive (not a zombie) and was started for the sandbox at `root`."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if status.rsplit(")", 1)[-1].split()[0] in {"Z", "X"}:
        reap(pid)
        return False
    return f"{MARKER}={root}".encode() in environ.split(b"\0")


def marked_pids(root: Path) -> list[int]:
    """Every live process carrying the sandbox's marker, including slurmstepd and its job steps."""
    pids = (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    return [pid for pid in pids if pid != os.getpid() and is_ours(pid, root)]


def stop(pids: Sequence[int], root: Path, *, grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `grace_s`, only for pids that are still ours."""
    targets = [pid for pid in pids if is_ours(pid, root)]
    for pid in targets:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(is_ours(pid, root) for pid in targets):
        time.sleep(0.1)
    for pid in targets:
        if is_ours(pid, root):
            _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(is_ours(pid, root) for pid in targets):
        time.sleep(0.05)


def reap(pid: int) -> None:
    """Collect a child that has exited, so it does not linger as a zombie in a long-lived caller."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _signal(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
