"""What a replay measured, per arm, against the targets of the replay benchmark; and the files it writes.

Completion time (JCT) runs from a job's first arrival to its final end, so a job killed by its limit
pays for the rerun; its wait is to the final start, but the wait estimators are judged on the first
attempt, the one they were asked about.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, computed_field

from advisor.wait.accuracy import WaitSource
from benchmarks.harness.model import ArmName, ReplayOutcome
from benchmarks.harness.scheduler import per_node_gpus

#: The benchmark's targets: the advisor's mean JCT reduction against each arm, and its wait error
#: as a fraction of ``--test-only``'s.
TARGET_REDUCTION: dict[ArmName, float] = {"habits": 0.30, "slurm": 0.10}
TARGET_WAIT_ERROR_RATIO = 0.5
#: A decision delay above this share of the median wait is flagged as the harness's, not the product's.
ARTEFACT_SHARE = 0.05


class _ReportFrozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ArmSummary(_ReportFrozen):
    arm: ArmName
    jobs: int
    mean_jct_s: float
    p90_jct_s: float
    mean_wait_s: float
    makespan_s: float
    """Last end minus first arrival."""
    gpu_hours: float
    """GPUs held times time held, killed attempts included."""
    timeouts: int
    median_wait_s: float = 0.0
    mean_decision_delay_s: float | None = None
    """Arrival to submission, where the decision took time (a real run); None: decided in no time."""
    advised: int = 0
    """Jobs that went in as the advisor predicted them (a prediction with the decision)."""
    advised_p90_over_limit: int = 0
    """Advised jobs whose predicted p90 run exceeds the limit they were given: likely killed."""
    advised_killed: int = 0
    """Advised jobs their limit killed in the replay."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def delay_is_artefact(self) -> bool:
        """A decision delay above ``ARTEFACT_SHARE`` of the median wait measures the harness, not the
        scheduling: a deployed daemon answers in milliseconds of a wait of minutes or hours."""
        delay = self.mean_decision_delay_s
        return delay is not None and delay > ARTEFACT_SHARE * self.median_wait_s


class WaitError(_ReportFrozen):
    """How far one estimator's waits, asked at submission, were from the actual ones.

    On a cluster with room most jobs start at once and both estimators say so, which makes every median
    zero; ``queued_*`` counts only the jobs that waited or that either estimator expected to wait.
    """

    jobs: int
    median_abs_error_s: float | None
    mean_abs_error_s: float | None
    queued_jobs: int
    queued_median_abs_error_s: float | None


class Reductions(_ReportFrozen):
    """Relative reduction of the advisor arm's mean JCT against each other arm (None: arm missing)."""

    vs_habits: float | None
    vs_slurm: float | None
    vs_oracle: float | None = None
    """Negative: how much longer than the same recommender fed the true step times the advisor's jobs took."""


def summarize(arm: ArmName, outcomes: Sequence[ReplayOutcome]) -> ArmSummary:
    if not outcomes:
        raise ValueError(f"arm {arm} has no outcomes to summarize")
    jcts = [outcome.end_s - outcome.arrival_s for outcome in outcomes]
    delays = [o.submitted_s - o.arrival_s for o in outcomes if o.submitted_s is not None]
    advised = [o for o in outcomes if o.decision.predicted_run_s is not None]
    return ArmSummary(
        arm=arm,
        jobs=len(outcomes),
        mean_jct_s=statistics.fmean(jcts),
        p90_jct_s=float(np.percentile(jcts, 90)),
        mean_wait_s=statistics.fmean(outcome.start_s - outcome.arrival_s for outcome in outcomes),
        makespan_s=max(o.end_s for o in outcomes) - min(o.arrival_s for o in outcomes),
        gpu_hours=sum(map(_gpu_seconds, outcomes)) / 3600,
        timeouts=sum(outcome.timed_out for outcome in outcomes),
        median_wait_s=statistics.median(outcome.start_s - outcome.arrival_s for outcome in outcomes),
        mean_decision_delay_s=statistics.fmean(delays) if delays else None,
        advised=len(advised),
        advised_p90_over_limit=sum(_p90_over_limit(o) for o in advised),
        advised_killed=sum(o.timed_out for o in advised),
    )


def _p90_over_limit(outcome: ReplayOutcome) -> bool:
    p90 = outcome.decision.predicted_p90_s
    return p90 is not None and p90 > outcome.decision.time_limit_s


def wait_errors(outcomes: Sequence[ReplayOutcome]) -> dict[WaitSource, WaitError]:
    """Each estimator's absolute errors over the jobs it gave an estimate for."""
    queued = [o for o in outcomes if max(_first_wait(o), *_estimates(o).values()) > 0]
    errors: dict[WaitSource, WaitError] = {}
    for estimator in ("slurm", "advisor"):
        misses = _misses(outcomes, estimator)
        queued_misses = _misses(queued, estimator)
        errors[estimator] = WaitError(
            jobs=len(misses),
            median_abs_error_s=_median(misses),
            mean_abs_error_s=statistics.fmean(misses) if misses else None,
            queued_jobs=len(queued_misses),
            queued_median_abs_error_s=_median(queued_misses),
        )
    return errors


def _estimates(outcome: ReplayOutcome) -> dict[WaitSource, float]:
    found: dict[WaitSource, float | None] = {
        "slurm": outcome.decision.slurm_wait_s,
        "advisor": outcome.decision.advisor_wait_s,
    }
    return {estimator: wait for estimator, wait in found.items() if wait is not None}


def _misses(outcomes: Sequence[ReplayOutcome], estimator: WaitSource) -> list[float]:
    return [
        abs(estimate - _first_wait(o))
        for o in outcomes
        if (estimate := _estimates(o).get(estimator)) is not None
    ]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def compare(summaries: Mapping[ArmName, ArmSummary]) -> Reductions:
    def reduction(baseline: ArmName) -> float | None:
        if "advisor" not in summaries or baseline not in summaries:
            return None
        return 1 - summaries["advisor"].mean_jct_s / summaries[baseline].mean_jct_s

    return Reductions(
        vs_habits=reduction("habits"), vs_slurm=reduction("slurm"), vs_oracle=reduction("oracle")
    )


def agreement(sim: Sequence[ReplayOutcome], real: Sequence[ReplayOutcome]) -> float:
    """Relative difference of the simulated run's mean JCT from the real-Slurm run's, same arm and
    workload; the fast mode is trusted where this stays within 10%."""
    real_mean = statistics.fmean(o.end_s - o.arrival_s for o in real)
    return statistics.fmean(o.end_s - o.arrival_s for o in sim) / real_mean - 1


def disagreement(sim: Sequence[ReplayOutcome], real: Sequence[ReplayOutcome]) -> float:
    """Job by job (by name), the mean of |simulated - real completion| over the real run's mean JCT: where
    `agreement` is near zero because early and late jobs cancel, this is not."""
    ends = {o.name: o.end_s for o in sim}
    real_mean = statistics.fmean(o.end_s - o.arrival_s for o in real)
    return statistics.fmean(abs(ends[o.name] - o.end_s) for o in real) / real_mean


def write_report(
    results: Mapping[ArmName, list[ReplayOutcome]], out_dir: Path, title: str, notes: list[str]
) -> Path:
    """``report.md``, ``report.json``, ``outcomes.json`` (every job of every arm, to compare runs job by job),
    ``completion_cdf.png`` and ``completion_bars.png`` in ``out_dir``; returns the markdown's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = {arm: summarize(arm, outcomes) for arm, outcomes in results.items()}
    errors = {arm: wait_errors(outcomes) for arm, outcomes in results.items()}
    reductions = compare(summaries)
    _plot(results, summaries, out_dir)
    payload = {
        "title": title,
        "arms": {arm: summary.model_dump() for arm, summary in summaries.items()},
        "reductions": reductions.model_dump(),
        "wait_errors": {
            arm: {estimator: error.model_dump() for estimator, error in by_estimator.items()}
            for arm, by_estimator in errors.items()
        },
        "notes": notes,
    }
    (out_dir / "report.json").write_text(json.dumps(payload, indent=2) + "\n")
    every = {arm: [o.model_dump(mode="json") for o in outcomes] for arm, outcomes in results.items()}
    (out_dir / "outcomes.json").write_text(json.dumps(every) + "\n")
    markdown = out_dir / "report.md"
    markdown.write_text(_markdown(title, summaries, reductions, errors, notes))
    return markdown


def _gpu_seconds(outcome: ReplayOutcome) -> float:
    config = outcome.decision.config
    held = config.nodes * per_node_gpus(config.gpus, config.nodes)
    killed = outcome.decision.time_limit_s if outcome.killed_start_s is not None else 0.0
    return held * (outcome.end_s - outcome.start_s + killed)


def _first_wait(outcome: ReplayOutcome) -> float:
    first_start = outcome.start_s if outcome.killed_start_s is None else outcome.killed_start_s
    return first_start - outcome.arrival_s


def _markdown(
    title: str,
    summaries: Mapping[ArmName, ArmSummary],
    reductions: Reductions,
    errors: Mapping[ArmName, Mapping[WaitSource, WaitError]],
    notes: list[str],
) -> str:
    lines = [f"# {title}", "", "## Job completion per arm", ""]
    lines += _table(
        [
            "arm",
            "jobs",
            "mean JCT (s)",
            "p90 JCT (s)",
            "mean wait (s)",
            "makespan (s)",
            "GPU-hours",
            "timeouts",
            "decision delay (s)",
            "advised: p90 beyond limit / killed",
        ],
        [
            [
                s.arm,
                str(s.jobs),
                *map(_number, (s.mean_jct_s, s.p90_jct_s, s.mean_wait_s, s.makespan_s)),
                f"{s.gpu_hours:.1f}",
                str(s.timeouts),
                _delay(s),
                f"{s.advised_p90_over_limit} / {s.advised_killed} of {s.advised}" if s.advised else "-",
            ]
            for s in summaries.values()
        ],
    )
    flagged = [s.arm for s in summaries.values() if s.delay_is_artefact]
    if flagged:
        lines += [
            "",
            f"Harness artefact: the decision delay of {', '.join(flagged)} exceeds {ARTEFACT_SHARE:.0%} of "
            "the median wait, so its JCT measures the replay's decisions, not the scheduling.",
        ]
    lines += ["", "![CDF of completion times](completion_cdf.png)", "", "![JCT](completion_bars.png)", ""]
    lines += ["## Advisor against the other arms (mean JCT reduction)", ""]
    lines += _table(
        ["against", "reduction", "target"],
        [
            [arm, _percent(value), f">= {target:.0%}: {_verdict(None if value is None else value >= target)}"]
            for arm, value, target in (
                ("habits", reductions.vs_habits, TARGET_REDUCTION["habits"]),
                ("slurm", reductions.vs_slurm, TARGET_REDUCTION["slurm"]),
            )
        ]
        + [["oracle (the same advisor fed the true step times)", _percent(reductions.vs_oracle), "-"]],
    )
    lines += ["", "## Wait prediction at submission (absolute error against the actual wait)", ""]
    lines += [
        "Each arm's jobs, for the estimates its decisions asked for: median and mean over all of them, and",
        "the median over the queued ones (jobs that waited or that either estimator expected to wait), which",
        "is what the ratio compares: where most jobs start at once, every estimator's median is zero.",
        "",
    ]
    rows = []
    for arm, by_estimator in errors.items():
        slurm, advisor = by_estimator["slurm"], by_estimator["advisor"]
        ratio = _ratio(advisor.queued_median_abs_error_s, slurm.queued_median_abs_error_s)
        met = None if ratio is None else ratio <= TARGET_WAIT_ERROR_RATIO
        rows.append(
            [
                arm,
                _error(slurm),
                _error(advisor),
                "-" if ratio is None else f"{ratio:.2f}",
                f"<= {TARGET_WAIT_ERROR_RATIO}: {_verdict(met)}",
            ]
        )
    header = ["arm", "--test-only: median / mean / queued median", "advisor: the same", "ratio (queued)"]
    lines += _table([*header, "target"], rows)
    if notes:
        lines += ["", "## Notes", "", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def _verdict(met: bool | None) -> str:
    return "not measured" if met is None else "met" if met else "missed"


def _error(error: WaitError) -> str:
    if error.median_abs_error_s is None or error.mean_abs_error_s is None:
        return "-"
    queued = "-" if error.queued_median_abs_error_s is None else _number(error.queued_median_abs_error_s)
    return (
        f"{_number(error.median_abs_error_s)} / {_number(error.mean_abs_error_s)} s ({error.jobs} jobs) / "
        f"{queued} s ({error.queued_jobs} queued)"
    )


def _delay(summary: ArmSummary) -> str:
    delay = summary.mean_decision_delay_s
    if delay is None:
        return "-"
    return _number(delay) + (" (harness artefact)" if summary.delay_is_artefact else "")


def _number(value: float) -> str:
    return f"{value:,.0f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _plot(
    results: Mapping[ArmName, list[ReplayOutcome]], summaries: Mapping[ArmName, ArmSummary], out_dir: Path
) -> None:
    """The CDF of completion times, and mean and p90 bars, per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for arm, outcomes in results.items():
        jcts = np.sort([o.end_s - o.arrival_s for o in outcomes])
        axis.step(jcts, np.arange(1, len(jcts) + 1) / len(jcts), where="post", label=arm)
    axis.set(xscale="log", xlabel="job completion time (s)", ylabel="fraction of jobs", title="JCT CDF")
    axis.legend()
    figure.tight_layout()
    figure.savefig(out_dir / "completion_cdf.png", dpi=120)
    plt.close(figure)

    figure, axis = plt.subplots(figsize=(6, 4))
    positions = np.arange(len(summaries))
    axis.bar(positions - 0.2, [s.mean_jct_s for s in summaries.values()], width=0.4, label="mean")
    axis.bar(positions + 0.2, [s.p90_jct_s for s in summaries.values()], width=0.4, label="p90")
    axis.set_xticks(positions, list(summaries))
    axis.set(ylabel="job completion time (s)", title="JCT per arm")
    axis.legend()
    figure.tight_layout()
    figure.savefig(out_dir / "completion_bars.png", dpi=120)
    plt.close(figure)
