"""The one exception the job-script parser raises, so callers need a single ``except``."""

from __future__ import annotations


class ScriptError(ValueError):
    """What sbatch would have refused, and where: ``train.sh:12``, ``command line`` or an env variable."""

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(f"{where}: {reason}")
