"""The compare page's chart: each partition's best candidate as wait plus run, drawn by matplotlib as SVG
(no script, no build step, nothing fetched by the browser)."""

from __future__ import annotations

import io
from typing import Any

from advisor.recommend.choose import Estimate, Recommendation


def best_per_partition(result: Recommendation) -> list[Estimate]:
    """The first-ranked candidate of each partition that fits, in the ranking's order."""
    seen: dict[str, Estimate] = {}
    for estimate in result.candidates:
        if estimate.fits and estimate.candidate.partition not in seen:
            seen[estimate.candidate.partition] = estimate
    return list(seen.values())


def bars_svg(result: Recommendation) -> str:
    """Hours of wait and of run (p50, with the p90 as a whisker) per partition; the chosen one marked."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    shown = best_per_partition(result)
    names = [e.candidate.partition for e in shown]
    waits = [e.wait_s / 3600 for e in shown]
    runs = [e.run_s / 3600 for e in shown]
    spreads = [(e.run_p90_s - e.run_s) / 3600 for e in shown]
    chosen = result.chosen.candidate.partition if result.chosen is not None else None
    # Text stays text (not glyph outlines): readable by screen readers, searchable, and testable.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        return _drawn(pyplot, shown, names, waits, runs, spreads, chosen)


def _drawn(
    pyplot: Any,
    shown: list[Estimate],
    names: list[str],
    waits: list[float],
    runs: list[float],
    spreads: list[float],
    chosen: str | None,
) -> str:
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
        figure.tight_layout()
        out = io.StringIO()
        figure.savefig(out, format="svg")
    finally:
        pyplot.close(figure)
    text = out.getvalue()
    return text[text.index("<svg") :]
