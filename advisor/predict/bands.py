"""A prediction's band by the evidence behind it, and its confidence as a property of that band. Pure.

A model measured whole at the asked batch size is known far better than one the zoo never saw, so one
machine-wide p90 either drowns the first in doubt or flatters the second. Each evidence class gets its
own p10/p50/p90 from held-out residuals, log(measured / predicted), of that class on the machine, as
split-conformal quantiles; the confidence label is then read off the band's width (`confidence_of`), so
"high" can only be said of a band that is narrow. Cuts: policies/README.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import ceil, exp
from typing import Literal

from pydantic import BaseModel, ConfigDict

from advisor.policy.schema import Confidence
from advisor.predict.types import Evidence

TRAINED_CLASSES: tuple[Evidence, ...] = ("measured", "interpolated", "layers", "zoo")
"""The classes a machine's held-out residuals can measure, each wider than the one before."""
MIN_SAMPLES = 20
"""Fewer held-out residuals than this and a class borrows the next wider class's band."""
HIGH_CUT = 1.25
MEDIUM_CUT = 1.6
"""p90/p50 at most ``HIGH_CUT`` is high confidence, at most ``MEDIUM_CUT`` medium, else low."""
QUANTILES = (0.1, 0.5, 0.9)
RETRAIN = "retrain for bands by evidence"


class ClassBand(BaseModel):
    """One evidence class's band on one machine: log ratios of measured to predicted time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    evidence: Evidence
    p10: float
    p50: float
    p90: float
    samples: int
    """Held-out residuals of this class itself, whether or not they made its band."""
    source: Evidence | Literal["machine"]
    """The class whose residuals made the band: this one, a wider one it borrows from, or the machine-wide
    band of a version trained before bands by evidence."""

    @property
    def width(self) -> float:
        """p90 / p50, what the confidence label is read from."""
        return exp(self.p90 - self.p50)

    @property
    def confidence(self) -> Confidence:
        return confidence_of(self.width)

    def note(self, machine: str) -> str | None:
        """Why the band is not the class's own, for the prediction's note."""
        if self.source == "machine":
            return f"band: machine {machine}'s held-out p90 for every prediction ({RETRAIN})"
        if self.source != self.evidence:
            return (
                f"band borrowed from {self.source}: only {self.samples} held-out samples of {self.evidence} "
                f"on machine {machine}"
            )
        if self.samples < MIN_SAMPLES:
            return f"band from only {self.samples} held-out samples of {self.evidence} on machine {machine}"
        return None


def confidence_of(width: float) -> Confidence:
    """The label a band of this p90/p50 earns."""
    if width <= HIGH_CUT:
        return "high"
    return "medium" if width <= MEDIUM_CUT else "low"


def conformal_quantile(residuals: Sequence[float], q: float) -> float:
    """The ceil((n+1)q)-th smallest of n residuals: a new exchangeable residual is at or under it with
    probability at least q. Past the largest (few residuals, high q), the largest."""
    ordered = sorted(residuals)
    rank = min(max(ceil((len(ordered) + 1) * q), 1), len(ordered))
    return ordered[rank - 1]


def class_bands(residuals: Mapping[Evidence, Sequence[float]]) -> tuple[ClassBand, ...]:
    """Each trained class's band from its own residuals where it has ``MIN_SAMPLES``, else borrowed from
    the next wider class that has, re-centred on the class's own prediction (a wider class's bias belongs
    to another predictor); where none has, the widest class with any residuals."""
    counts = {e: len(residuals.get(e, ())) for e in TRAINED_CLASSES}
    bands = []
    for index, evidence in enumerate(TRAINED_CLASSES):
        wider = TRAINED_CLASSES[index:]
        source = next((e for e in wider if counts[e] >= MIN_SAMPLES), None)
        if source is None:
            source = next((e for e in reversed(wider) if counts[e]), None)
        if source is None:
            continue
        p10, p50, p90 = (conformal_quantile(residuals[source], q) for q in QUANTILES)
        centre = p50 if source != evidence else 0.0
        bands.append(
            ClassBand(
                evidence=evidence,
                p10=p10 - centre,
                p50=p50 - centre,
                p90=p90 - centre,
                samples=counts[evidence],
                source=source,
            )
        )
    return tuple(bands)


def machine_band(evidence: Evidence, p90_log_ratio: float) -> ClassBand:
    """The band of a version trained before bands by evidence: its one held-out p90, taken as symmetric,
    labelled by the same cuts (a wide one is never high)."""
    p90 = max(p90_log_ratio, 0.0)
    return ClassBand(evidence=evidence, p10=-p90, p50=0.0, p90=p90, samples=0, source="machine")
