"""A Slurm for the tests of code above the adapter: a runner that answers from a recording of real Slurm
output and keeps every command it is asked to run, as httpx ships a mock transport.

Record against a real cluster with `record` (each answer is a `CommandResult` kept under the words that
select it as its argv, such as ``("squeue", "--json")`` for every squeue call with more options after
them), save it, and replay it with `RecordedRunner`. The package ships none: a test suite records its own
cluster (this project's, the sandbox's, in ``tests/data/slurm/sandbox-22.05.recording.json``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from pydantic import TypeAdapter

from advisor.slurm.runner import CommandResult, Runner, SlurmError

_RECORDING = TypeAdapter(list[CommandResult])
"""A recording as `save` writes it: each answer's fields, its argv a list."""


@dataclass(frozen=True)
class RecordedCall:
    argv: tuple[str, ...]
    stdin: str | None


@dataclass
class RecordedRunner:
    """Answers each command with the recorded answer whose words begin it; no answer is a failure to run,
    as a missing executable is for the real runners."""

    answers: Sequence[CommandResult]
    """Each answers the commands that begin with its argv; the longest match wins."""
    calls: list[RecordedCall] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> RecordedRunner:
        return cls(_RECORDING.validate_json(path.read_bytes()))

    def run(self, argv: Sequence[str], *, stdin: str | None = None, timeout: float) -> CommandResult:
        args = tuple(argv)
        self.calls.append(RecordedCall(args, stdin))
        matches = [answer for answer in self.answers if args[: len(answer.argv)] == answer.argv]
        if not matches:
            raise SlurmError(args, "no recorded answer")
        best = max(matches, key=lambda answer: len(answer.argv))
        return CommandResult(args, best.returncode, best.stdout, best.stderr)

    def commands(self) -> list[tuple[str, ...]]:
        """Each call's words up to its first option: ``("squeue",)``, ``("env", "TZ=UTC", "sacct")``."""
        return [tuple(_words(call.argv)) for call in self.calls]


def record(
    runner: Runner, argv: Sequence[str], words: int, stdin: str | None = None, timeout: float = 30
) -> CommandResult:
    """Run ``argv`` for real and keep its answer under its first ``words`` words."""
    result = runner.run(argv, stdin=stdin, timeout=timeout)
    return replace(result, argv=tuple(argv[:words]))


def save(answers: Sequence[CommandResult], path: Path) -> None:
    path.write_text(json.dumps([asdict(answer) for answer in answers], indent=1) + "\n", encoding="utf-8")


def _words(argv: Sequence[str]) -> list[str]:
    words: list[str] = []
    for word in argv:
        if word.startswith("-"):
            break
        words.append(word)
    return words
