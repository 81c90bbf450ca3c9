"""The pages' charts, drawn by matplotlib as SVG (no script, no build step, nothing fetched by the browser):
the compare page's wait plus run per partition, the admin page's predicted against actual run."""

from __future__ import annotations

import io
from typing import Any

from advisor.predict.calibration import CENSORED_STATES, Outcome
from advisor.recommend.choose import Estimate, Recommendation


def best_per_partition(result: Recommendation) -> list[Estimate]:
    """The first-ranked candidate of each partition that fits, in the ranking's order."""
    seen: dict[str, Estimate] = {}
    for estimate in result.candidates:
        if estimate.fits and estimate.candidate.partition not in seen:
            seen[estimate.candidate.partition] = estimate
    return list(seen.values())


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def bars_svg(result: Recommendation) -> str:
    """Hours of wait and of run (p50, with the p90 as a whisker) per partition; the chosen one marked."""
    pyplot = _pyplot()
    chosen = result.chosen.candidate.partition if result.chosen is not None else None
    # Text stays text (not glyph outlines): readable by screen readers, searchable, and testable.
    with pyplot.rc_context({"svg.fonttype": "none"}):
        return _drawn(pyplot, best_per_partition(result), chosen)


def _drawn(pyplot: Any, shown: list[Estimate], chosen: str | None) -> str:
    names = [e.candidate.partition for e in shown]
    waits = [e.wait_s / 3600 for e in shown]
    runs = [e.run_s / 3600 for e in shown]
    spreads = [(e.run_p90_s - e.run_s) / 3600 for e in shown]
    figure, axis = pyplot.subplots(figsize=(7, 0.6 + 0.5 * max(len(shown), 1)))
    try:
        rows = range(len(shown))
        axis.barh(rows, waits, color="#bbbbbb", label="wait")
        colors = ["#1f77b4" if name == chosen else "#7fb2d9" for name in names]
        axis.barh(rows, runs, left=waits, color=colors, xerr=[[0] * len(shown), spreads], label="run")
        axis.set_yticks(list(rows), [f"{n} (chosen)" if n == chosen else n for n in names])
        axis.invert_yaxis()
        axis.set_xlabel("hours from submission (run: p50, whisker to p90)")
        axis.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncols=2, frameon=False)
        return _svg(figure)
    finally:
        pyplot.close(figure)


def scatter_svg(outcomes: list[Outcome]) -> str:
    """Each finished advised job: predicted run against Slurm's elapsed, in hours on log axes, a colour per
    partition; a job killed at its limit is an open marker (it would have run at least that long)."""
    pyplot = _pyplot()
    with pyplot.rc_context({"svg.fonttype": "none"}):
        figure, axis = pyplot.subplots(figsize=(5.5, 5))
        try:
            partitions = sorted({o.partition for o in outcomes})
            for index, partition in enumerate(partitions):
                color = f"C{index}"
                for timed_out in (False, True):
                    shown = [o for o in outcomes if o.partition == partition and _timed_out(o) == timed_out]
                    if shown:
                        axis.scatter(
                            [o.predicted_s / 3600 for o in shown],
                            [_actual_hours(o) for o in shown],
                            label=f"{partition} (killed at its limit)" if timed_out else partition,
                            facecolors="none" if timed_out else color,
                            edgecolors=color,
                        )
            hours = [o.predicted_s / 3600 for o in outcomes] + [_actual_hours(o) for o in outcomes]
            low, high = min(hours) / 1.5, max(hours) * 1.5
            axis.plot([low, high], [low, high], color="#888888", linewidth=1, label="actual = predicted")
            axis.set(xscale="log", yscale="log", xlim=(low, high), ylim=(low, high))
            axis.set_xlabel("predicted run (hours, p50)")
            axis.set_ylabel("actual run (hours, Slurm's elapsed)")
            axis.legend(loc="upper left", frameon=False, fontsize="small")
            return _svg(figure)
        finally:
            pyplot.close(figure)


def _actual_hours(outcome: Outcome) -> float:
    """At least a second: a log axis has no zero."""
    return max(outcome.actual_s, 1.0) / 3600


def _timed_out(outcome: Outcome) -> bool:
    return outcome.state in CENSORED_STATES


def _svg(figure: Any) -> str:
    figure.tight_layout()
    out = io.StringIO()
    figure.savefig(out, format="svg")
    text = out.getvalue()
    return text[text.index("<svg") :]
