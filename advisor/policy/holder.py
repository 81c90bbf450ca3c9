"""The policy in force for a long-running service: a broken edit never takes the service down, the last
good policy stays in force and the error is kept for reporting.

At start a missing file means no admin policy: the built-in default (advise only) applies and nothing is
wrong. A broken file at start also leaves the built-in default in force, with the error recorded. Once a
file has been read, a file that goes missing is an error like any other (the last good policy stays);
an admin returns to the defaults with an empty file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from advisor.policy.load import PolicyError, load_policy
from advisor.policy.schema import Policy
from advisor.tomlfile import Problem


class PolicyHolder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.current = Policy()
        self.source: str | None = None
        """The file the policy in force came from; None while the built-in default is in force."""
        self.generation = 0
        """Counts the policies put in force, so that answers cached under an older one are not reused."""
        self.last_error: PolicyError | None = None
        if path.exists():
            self.reload()

    def reload(self) -> PolicyError | None:
        """Read the file again; on success the new policy replaces the old one and the error is cleared."""
        try:
            _regular_file(self.path)
            policy = load_policy(self.path)
        except PolicyError as error:
            self.last_error = error
            return error
        except Exception as error:  # a bug in reading must not end the service either
            self.last_error = PolicyError(str(self.path), [Problem(line=None, message=repr(error))])
            return self.last_error
        self.current = policy
        self.source = str(self.path)
        self.generation += 1
        self.last_error = None
        return None

    def stalled(self, seconds: float) -> None:
        """A reload still reading after ``seconds``: the policy in force stays, and the error says why."""
        problem = Problem(line=None, message=f"not read within {seconds:g} s (a file that blocks on read?)")
        self.last_error = PolicyError(str(self.path), [problem])


def _regular_file(path: Path) -> None:
    """A policy is read only from a regular file: a FIFO or a device would hold the reader until someone
    writes to it. Opened without blocking (a FIFO's open would block too) and checked on what was opened."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise PolicyError(str(path), [Problem(line=None, message=f"cannot read: {error.strerror}")]) from None
    try:
        mode = os.fstat(descriptor).st_mode
    finally:
        os.close(descriptor)
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else "a device or socket"
        raise PolicyError(str(path), [Problem(line=None, message=f"not a regular file ({kind}): not read")])
