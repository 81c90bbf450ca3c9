"""`advisor recommend SCRIPT [job description options] [sbatch options]`: the advice, without submitting."""

from __future__ import annotations

import argparse
import getpass
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from advisor import readable, terminal
from advisor.jobscript.advisor_words import split_command_line
from advisor.jobscript.datasets import load_datasets
from advisor.jobscript.rewrite import AdviceError, advice_environment, apply_advice
from advisor.jobscript.submission import ParsedSubmission, parse_submission
from advisor.policy.holder import PolicyHolder
from advisor.recommend.choose import Estimate, Recommendation, describe
from advisor.settings.validated import Settings
from advisor.slurm.values import format_duration, format_seconds
from advisor.submit_guard import added_words


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    parser = commands.add_parser(
        "recommend",
        help="candidates, choice and explanation for a batch script, without submitting it",
        usage="advisor recommend [--policy FILE] [--db DB] [--json] SCRIPT [job description options] "
        "[sbatch options] [--json]",
    )
    parser.add_argument("--policy", type=Path, default=settings.policy, help="default: %(default)s")
    parser.add_argument("--db", type=Path, default=settings.database)
    parser.add_argument("--gpu-specs", type=Path, default=settings.gpu_specs)
    parser.add_argument("--json", action="store_true", help="the whole recommendation as JSON")
    parser.add_argument("script", type=Path)
    parser.add_argument("words", nargs=argparse.REMAINDER, help="#ADVISOR options, then sbatch options")
    parser.set_defaults(handler=_recommend)


def _recommend(args: argparse.Namespace, console: Console) -> int:
    as_json = args.json or "--json" in args.words
    words = [word for word in args.words if word != "--json"]
    parsed = parse_submission(args.script, words, os.environ, load_datasets(args.settings.datasets))
    return report(_recommend_here(args, parsed, console), parsed, args.script, words, as_json, console)


def report(
    result: Recommendation,
    parsed: ParsedSubmission,
    script: Path,
    words: Sequence[str],
    as_json: bool,
    console: Console,
) -> int:
    """The recommendation for `advisor recommend SCRIPT WORDS`, made here or by the daemon: as JSON, or as
    the table with what the advice adds to this submission."""
    if as_json:
        print(result.model_dump_json(indent=2))
        return 0
    changes = None
    if result.advice is not None:
        partitions = {candidate.candidate.partition for candidate in result.candidates}
        argv = [*split_command_line(words)[1], str(script)]
        try:
            submission = apply_advice(parsed.request, parsed.description, argv, result.advice, partitions)
            changes = [*added_words(argv, submission.argv, submission.env), *submission.notes]
        except AdviceError as error:
            changes = [f"(cannot be applied: {error})"]
    show(result, console, changes)
    return 0


def _recommend_here(args: argparse.Namespace, parsed: ParsedSubmission, console: Console) -> Recommendation:
    """This install's own recommender, on the database and models it reads (the service's packages)."""
    # torch and xgboost load here only: introspection and the predictors need them.
    from advisor.factory_table import table_for
    from advisor.history.service import MODEL_FILE, RunHistory
    from advisor.predict.service import load_specs
    from advisor.recommend.cluster import ClusterView
    from advisor.recommend.edges import Sources, recommend_now
    from advisor.slurm.client import SlurmClient
    from advisor.store import Store

    description = parsed.description
    table = None
    if description is not None:
        table = table_for(description, allow_factories=True, environ=os.environ)
    holder = PolicyHolder(args.policy)
    if holder.last_error is not None:
        console.print(f"advisor: warning: policy not used: {holder.last_error}", highlight=False)
    specs = load_specs(args.gpu_specs) if args.gpu_specs.is_dir() else []
    now = datetime.now(UTC)
    sources = Sources(
        ClusterView(SlurmClient.from_settings(args.settings.slurm), lambda: now),
        Store.existing(args.db),
        holder.current,
        specs,
        RunHistory(args.settings.models_dir / MODEL_FILE),
    )
    return recommend_now(sources, parsed, table, getpass.getuser(), now)


HEADERS = (
    "",
    "configuration",
    "wait\n(Slurm)",
    "wait\n(advisor)",
    "run\n(p50)",
    "run\n(p90)",
    "total",
    "cost",
    "fits",
    "confidence",
)
ARRAY_HEADERS = {
    "wait\n(Slurm)": "wait, first task\n(Slurm)",
    "wait\n(advisor)": "wait, first task\n(advisor)",
    "run\n(p50)": "run, each task\n(p50)",
    "run\n(p90)": "run, each task\n(p90)",
    "total": "total\n(last task)",
    "cost": "cost\n(each task)",
}
"""A job array's headers: its run, wait and cost are a task's, its total the last task's end."""
SHOWN = 8
"""Candidates a table shows (and the job as submitted, wherever it ranks); `--json` has them all."""


def show(result: Recommendation, console: Console, changes: Sequence[str] | None = None) -> None:
    """The candidates as a table, the chosen one and the job as submitted marked, then the reasons and the
    advice as what it adds to the submission (``changes``: sbatch options, variables, notes), and last,
    where a user's eye lands, a run likely killed at its limit."""
    if result.candidates:
        _print_candidates(result, console)
        shown = sum(len(group) for group in _shown(result))
        if shown < len(result.candidates):
            console.print(f"and {len(result.candidates) - shown} more candidates (--json: all)")
    for line in _array_lines(result):
        console.print(line, highlight=False)
    for reason in result.reasons:
        console.print(reason, highlight=False)
    if result.advice is not None:
        verb = "applies" if result.apply else "suggests (not applied)"
        console.print(f"the advisor {verb}: {' '.join(changes or advice_words(result))}", highlight=False)
    if result.candidates:
        console.print(
            "waits marked * come from the estimator with the smaller measured error", highlight=False
        )
    for warning in result.kill_warnings:
        console.print(f"warning: {warning}", style="bold yellow", highlight=False)


def candidates_table(result: Recommendation) -> Table:
    """The best `SHOWN` rows and the job as submitted, candidates predicted alike merged into one row.
    Cells fold to the console's width rather than being cut."""
    table = Table(
        title="candidates, best first",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        pad_edge=False,
        collapse_padding=True,
    )
    array = any(estimate.array is not None for estimate in result.candidates)
    for column in HEADERS:
        table.add_column(ARRAY_HEADERS.get(column, column) if array else column)
    for group in _shown(result):
        table.add_row(*_row(group, result))
    return table


def _print_candidates(result: Recommendation, console: Console) -> None:
    """The table where the terminal is wide enough for every column, else each row as two lines of
    ``header value`` pairs (a table squeezed below its columns' widths loses its last columns)."""
    table = candidates_table(result)
    if terminal.fit(table, console.width):
        console.print(table)
        return
    console.print(table.title, highlight=False)
    labels = [str(column.header).replace("\n", " ") for column in table.columns]
    for group in _shown(result):
        mark, configuration, *figures = _row(group, result)
        console.print(f"{mark or '-'}: {configuration}", highlight=False)
        pairs = [f"{label} {cell}" for label, cell in zip(labels[2:], figures, strict=True)]
        console.print("  " + "; ".join(pairs), highlight=False)


def _array_lines(result: Recommendation) -> list[str]:
    """For a job array, the whole array as chosen and as submitted (once, where they are one)."""

    def money(value: float) -> str:
        return readable.cost(value, result.cost_unit)

    lines: list[str] = []
    said: list[Estimate] = []
    for label, estimate in (("as chosen", result.chosen), ("as submitted", result.baseline)):
        if estimate is not None and estimate.array is not None and estimate not in said:
            said.append(estimate)
            lines.append(f"{label}: {estimate.array.describe(readable.duration, money)}")
    return lines


def _shown(result: Recommendation) -> list[list[Estimate]]:
    return [g for rank, g in enumerate(alike(result.candidates)) if rank < SHOWN or result.baseline in g]


def alike(estimates: Sequence[Estimate]) -> list[list[Estimate]]:
    """Candidates in rank order, those that differ only in AMP or channels_last and are predicted the same
    (channels_last changes nothing on a CPU) in one group, at the first one's rank."""
    groups: dict[tuple[object, ...], list[Estimate]] = {}
    for estimate in estimates:
        groups.setdefault(_prediction(estimate), []).append(estimate)
    return list(groups.values())


def _prediction(estimate: Estimate) -> tuple[object, ...]:
    candidate = estimate.candidate.model_copy(update={"amp": False, "channels_last": False})
    return (
        candidate,
        estimate.run_s,
        estimate.run_p90_s,
        estimate.slurm_wait_s,
        estimate.advisor_wait_s,
        estimate.cost,
        estimate.fits,
        estimate.confidence,
        estimate.efficiency,
    )


def advice_words(result: Recommendation) -> list[str]:
    """The advice as the options and variables it adds, where the submission it was applied to is gone
    (`advisor explain`): the GPU request in sbatch's plain form, not necessarily the user's own."""
    advice = result.advice
    assert advice is not None
    words = []
    if advice.partition is not None:
        words.append(f"--partition={','.join([advice.partition, *advice.other_partitions])}")
    if advice.gpus is not None:
        words.append(f"--gpus={advice.gpu_type + ':' if advice.gpu_type else ''}{advice.gpus}")
    if advice.time_limit is not None:
        words.append(f"--time={format_duration(advice.time_limit)}")
    return words + [f"{name}={value}" for name, value in advice_environment(None, advice).items()]


def _row(group: Sequence[Estimate], result: Recommendation) -> list[str]:
    estimate = next((e for e in group if e in (result.chosen, result.baseline)), group[0])
    return [
        _mark(group, result),
        _configuration(group, estimate)
        + ("" if estimate.efficiency is None else f", scaling {estimate.efficiency:.2f}"),
        _wait(estimate.slurm_wait_s, estimate.wait_source == "slurm"),
        _wait(estimate.advisor_wait_s, estimate.wait_source == "advisor"),
        format_seconds(estimate.run_s),
        format_seconds(estimate.run_p90_s),
        format_seconds(estimate.total_s),
        readable.cost(estimate.cost, result.cost_unit),
        "yes" if estimate.fits else "no",
        f"{estimate.confidence} (p90 {readable.ratio(estimate.run_p90_s / max(estimate.run_s, 1e-9))})",
    ]


def _configuration(group: Sequence[Estimate], estimate: Estimate) -> str:
    """The candidate as described, its group's knobs said: ``channels_last either way`` where every
    combination is in it, else each (``AMP, channels_last or both``)."""
    knobs = {"amp": "AMP", "channels_last": "channels_last"}
    either = [knob for knob in knobs if len({getattr(e.candidate, knob) for e in group}) > 1]
    if not either:
        return describe(estimate.candidate)
    plain = estimate.candidate.model_copy(update=dict.fromkeys(either, False))
    variants = {tuple(knob for knob in either if getattr(e.candidate, knob)) for e in group}
    if len(variants) == 2 ** len(either):
        said = f"{' and '.join(knobs[knob] for knob in either)} either way"
    else:
        named = [_variant(variant, knobs) for variant in sorted(variants, key=lambda v: (len(v), v))]
        said = f"{', '.join(named[:-1])} or {named[-1]}"
    return f"{describe(plain)}, {said} (same prediction)"


def _variant(variant: tuple[str, ...], knobs: dict[str, str]) -> str:
    if not variant:
        return "neither"
    return "both" if len(variant) == len(knobs) else " and ".join(knobs[knob] for knob in variant)


def _mark(group: Sequence[Estimate], result: Recommendation) -> str:
    submitted = result.baseline in group
    if result.chosen in group:
        return "chosen (as submitted)" if submitted else "chosen"
    return "as submitted" if submitted else ""


def _wait(seconds: float | None, used: bool) -> str:
    return "-" if seconds is None else format_seconds(seconds) + (" *" if used else "")
