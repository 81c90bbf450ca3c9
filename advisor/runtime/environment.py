"""The training job's side of the environment contract: what the advice asks of one training step.

Pure (no torch): it only reads `ADVISOR_*` variables (see `advisor.contract`) and falls back to what the
user's own script would have done, so a job submitted without the advisor trains exactly as written.
Whatever the advice changes, the global batch (micro-batch x accumulation x processes) stays the one the
optimizer sees, so the user trains the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from advisor import contract
from advisor.precision import AMP_MODES, Amp


class ContractError(ValueError):
    """An `ADVISOR_*` value the job cannot follow; the message names the variable."""


@dataclass(frozen=True)
class RuntimeSettings:
    """How one optimizer step runs in each process."""

    micro_batch: int
    grad_accum: int = 1
    amp: Amp = "off"
    channels_last: bool = False
    world_size: int = 1

    def __post_init__(self) -> None:
        for name in ("micro_batch", "grad_accum", "world_size"):
            if getattr(self, name) < 1:
                raise ContractError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.amp not in AMP_MODES:
            raise ContractError(f"amp must be one of {', '.join(AMP_MODES)}, not {self.amp!r}")

    @property
    def global_batch(self) -> int:
        """Samples per optimizer step over all processes."""
        return self.micro_batch * self.grad_accum * self.world_size


def read_settings(environ: Mapping[str, str], user: RuntimeSettings) -> RuntimeSettings:
    """The advised settings from `environ`, each absent variable falling back to `user`'s.

    The global batch is kept: given (or, when absent, the user's) with only one of micro-batch and
    accumulation, the other follows from it; given alone, the user's accumulation is kept.
    """
    micro = _positive(environ, contract.MICRO_BATCH)
    accum = _positive(environ, contract.GRAD_ACCUM)
    total = _positive(environ, contract.GLOBAL_BATCH)
    source = f"{contract.GLOBAL_BATCH}={total}"
    if total is None and (micro is None) != (accum is None):
        total, source = user.global_batch, f"the script's own global batch {user.global_batch}"
    if total is not None and (micro is None or accum is None):
        if total % user.world_size:
            raise ContractError(f"{source} does not divide among {user.world_size} processes")
        per_process = total // user.world_size
        if micro is None:
            accum = accum if accum is not None else user.grad_accum
            micro = _quotient(per_process, accum, contract.GRAD_ACCUM, source)
        else:
            accum = _quotient(per_process, micro, contract.MICRO_BATCH, source)
    settings = RuntimeSettings(
        micro_batch=micro if micro is not None else user.micro_batch,
        grad_accum=accum if accum is not None else user.grad_accum,
        amp=_amp(environ, user.amp),
        channels_last=_flag(environ, contract.CHANNELS_LAST, user.channels_last),
        world_size=user.world_size,
    )
    if total is not None and settings.global_batch != total:
        raise ContractError(
            f"{contract.MICRO_BATCH}={settings.micro_batch} x {contract.GRAD_ACCUM}={settings.grad_accum}"
            f" x {settings.world_size} processes is {settings.global_batch},"
            f" not {source}"
        )
    return settings


def _positive(environ: Mapping[str, str], name: str) -> int | None:
    raw = environ.get(name)
    if raw is None:
        return None
    text = raw.strip()
    if not text.isdecimal() or int(text) < 1:
        raise ContractError(f"{name}={raw!r} is not a positive integer")
    return int(text)


def _quotient(whole: int, part: int, part_name: str, source: str) -> int:
    if whole % part:
        raise ContractError(f"{source} per process ({whole}) is not a multiple of {part_name}={part}")
    return whole // part


def _amp(environ: Mapping[str, str], default: Amp) -> Amp:
    raw = environ.get(contract.AMP)
    if raw is None:
        return default
    if raw not in AMP_MODES:
        raise ContractError(f"{contract.AMP}={raw!r} is not one of {', '.join(AMP_MODES)}")
    return raw


def _flag(environ: Mapping[str, str], name: str, default: bool) -> bool:
    raw = environ.get(name)
    if raw is None:
        return default
    if raw not in ("0", "1"):
        raise ContractError(f"{name}={raw!r} is not 0 or 1")
    return raw == "1"
