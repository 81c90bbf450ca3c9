"""The single funnel through which every Slurm command runs, locally or over SSH.

Keeping process handling here means timeouts, environment hygiene, decoding and error reporting are
decided once, and the client above only ever sees ``CommandResult`` or ``SlurmError``.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Self

if TYPE_CHECKING:
    from fabric import Connection

    from advisor.settings.validated import SlurmSettings

#: Variables that silently change what Slurm commands do or print (default partition, output format...).
_SLURM_PREFIXES = ("SBATCH_", "SLURM_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_", "SACCT_")
_STDERR_TAIL_LINES = 3
_POLL_S = 0.05
#: Exit codes of ``env`` itself when it cannot run the command (not executable, not found).
_ENV_EXEC_FAILED = (126, 127)


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class SlurmError(Exception):
    """The one error a Slurm command can end in, so callers need a single ``except``.

    ``returncode`` is None when the command never exited (timeout, missing executable, lost connection).
    """

    def __init__(
        self,
        argv: Sequence[str],
        reason: str,
        *,
        returncode: int | None = None,
        stdout: str = "",
        stderr: str = "",
    ) -> None:
        self.argv = tuple(argv)
        self.reason = reason
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(self._message())

    def _message(self) -> str:
        status = "did not complete" if self.returncode is None else f"exit code {self.returncode}"
        message = f"{shlex.join(self.argv)}: {self.reason} ({status})"
        tail = [line.strip() for line in self.stderr.splitlines() if line.strip()][-_STDERR_TAIL_LINES:]
        return f"{message}; stderr: {' | '.join(tail)}" if tail else message


def clean_environment(base: Mapping[str, str], passed: Mapping[str, str]) -> dict[str, str]:
    """Drop inherited Slurm variables, then add the ones set on purpose (such as SLURM_CONF)."""
    env = {name: value for name, value in base.items() if not name.startswith(_SLURM_PREFIXES)}
    env.update(passed)
    return env


class Runner(Protocol):
    def run(self, argv: Sequence[str], *, stdin: str | None = None, timeout: float) -> CommandResult:
        """Run to completion and return the result whatever the exit code.

        Raises SlurmError only when the command did not complete.
        """
        ...


class LocalRunner:
    """Runs commands on this machine, each in its own session so a timeout can kill all its children."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = dict(env or {})

    def run(self, argv: Sequence[str], *, stdin: str | None = None, timeout: float) -> CommandResult:
        args = tuple(argv)
        try:
            process = subprocess.Popen(
                args,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=clean_environment(os.environ, self._env),
                start_new_session=True,
            )
        except OSError as error:
            reason = "executable not found" if isinstance(error, FileNotFoundError) else str(error)
            raise SlurmError(args, reason) from error
        try:
            stdout, stderr = process.communicate(None if stdin is None else stdin.encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            stdout, stderr = _kill_group(process)
            raise SlurmError(
                args, f"timed out after {timeout:g} s", stdout=_decode(stdout), stderr=_decode(stderr)
            ) from None
        return CommandResult(args, process.returncode, _decode(stdout), _decode(stderr))


def _kill_group(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Kill the command's whole process group and reap it, never waiting on escaped grandchildren."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    try:
        return process.communicate(timeout=1)
    except subprocess.TimeoutExpired:
        # Something outside the group still holds the pipes open; give up on the rest of the output.
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        process.wait()
        return b"", b""


class SshRunner:
    """Runs commands on a login node over SSH, using one connection for the runner's lifetime.

    Host keys: with ``known_hosts`` only hosts listed in that file are accepted; without it an unknown
    host key is accepted and remembered for this connection (trust on first use, for sandboxes).
    The remote login shell must be POSIX (sh, bash, zsh) because the command line is shlex-quoted.
    A timeout closes the channel but cannot kill the remote process.
    """

    def __init__(
        self,
        host: str,
        port: int = 22,
        user: str | None = None,
        key_filename: str | None = None,
        env: Mapping[str, str] | None = None,
        known_hosts: str | None = None,
    ) -> None:
        self._host = host
        self._port = port
        self._user = user
        self._key_filename = key_filename
        self._env = dict(env or {})
        self._known_hosts = known_hosts
        self._connection: Connection | None = None
        self._connecting = threading.Lock()
        """The daemon's threads (requests, the scheduler's jobs) share the runner: two that found no
        connection at once would each open one on the same client, and one's transport dies under it."""

    def run(self, argv: Sequence[str], *, stdin: str | None = None, timeout: float) -> CommandResult:
        # paramiko and fabric load on first use: advise-submit and local Slurm never pay for them.
        import paramiko

        args = tuple(argv)
        command = shlex.join(["env", *(f"{name}={value}" for name, value in self._env.items()), *args])
        try:
            result = self._exec(args, command, stdin, timeout)
        except SlurmError:
            raise
        except (paramiko.SSHException, OSError, EOFError) as error:
            self.close()  # the connection may be half-dead; the next call reconnects
            target = f"{self._user + '@' if self._user else ''}{self._host}:{self._port}"
            raise SlurmError(args, f"ssh to {target} failed: {error or type(error).__name__}") from error
        if result.returncode in _ENV_EXEC_FAILED and result.stderr.startswith("env:"):
            # Same contract as LocalRunner: a missing executable is a failure to run, not an exit code.
            raise SlurmError(
                args, "executable not found or not executable on the remote host", stderr=result.stderr
            )
        return result

    def close(self) -> None:
        with self._connecting:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _connect(self, timeout: float) -> Any:
        """Open (or reuse) the fabric connection and return its paramiko transport."""
        import paramiko
        from fabric import Connection

        with self._connecting:
            if self._connection is None:
                connection = Connection(
                    self._host,
                    user=self._user,
                    port=self._port,
                    connect_timeout=max(1, round(timeout)),
                    connect_kwargs={
                        "key_filename": self._key_filename,
                        "look_for_keys": False,
                        "allow_agent": False,
                    },
                )
                if self._known_hosts is not None:
                    connection.client.load_host_keys(self._known_hosts)
                    connection.client.set_missing_host_key_policy(paramiko.RejectPolicy())
                self._connection = connection
            self._connection.open()
            return self._connection.client.get_transport()

    def _exec(self, args: tuple[str, ...], command: str, stdin: str | None, timeout: float) -> CommandResult:
        """Drive a paramiko channel directly.

        Fabric's ``run(in_stream=...)`` feeds stdin one byte per 10 ms, so a job script would take
        seconds to arrive; here it is sent at once and then EOF is signalled with ``shutdown_write``.
        """
        deadline = time.monotonic() + timeout
        channel = self._connect(timeout).open_session(timeout=timeout)
        stdout, stderr = bytearray(), bytearray()
        try:
            channel.settimeout(timeout)
            channel.exec_command(command)
            if stdin is not None:
                channel.sendall(stdin.encode())
            channel.shutdown_write()
            # sshd may report the exit status before the last output: read on until EOF as well.
            while not (channel.eof_received and channel.exit_status_ready() and _drained(channel)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SlurmError(
                        args,
                        f"timed out after {timeout:g} s",
                        stdout=_decode(stdout),
                        stderr=_decode(stderr),
                    )
                # The channel's fd only wakes on stdout, so poll briefly for stderr.
                select.select([channel], [], [], min(remaining, _POLL_S))
                while channel.recv_ready():
                    stdout += channel.recv(65536)
                while channel.recv_stderr_ready():
                    stderr += channel.recv_stderr(65536)
            returncode = channel.recv_exit_status()
        except TimeoutError:
            raise SlurmError(args, f"timed out after {timeout:g} s") from None
        finally:
            channel.close()
        return CommandResult(args, returncode, _decode(stdout), _decode(stderr))


def _decode(data: bytes | bytearray) -> str:
    """Whole-output decoding (no chunk boundaries to split characters); bad bytes become U+FFFD."""
    return bytes(data).decode("utf-8", errors="replace")


def _drained(channel: Any) -> bool:
    return not channel.recv_ready() and not channel.recv_stderr_ready()


def runner_for(slurm: SlurmSettings) -> LocalRunner | SshRunner:
    """The runner the settings name: this host's Slurm commands, or a login node's over SSH."""
    if slurm.mode == "local":
        return LocalRunner(slurm.env)
    assert slurm.host is not None and slurm.key is not None  # the settings' validator guarantees them
    return SshRunner(
        slurm.host,
        slurm.port,
        slurm.user,
        str(slurm.key),
        slurm.env,
        None if slurm.known_hosts is None else str(slurm.known_hosts),
    )
