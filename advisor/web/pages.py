"""The pages, apart from any web server: each is a function of the daemon, the caller and the query, and
the same functions serve `advisor web` (aiohttp) and the Open OnDemand app (WSGI, `advisor.web.wsgi`).

Links are relative (``jobs``, not ``/jobs``): under Open OnDemand the app lives below ``/pun/sys/advisor/``.
The daemon is asked for a preview: answered like `advise-submit`'s request, never audited, never submitted.
Nothing on a page submits a job, and no page shows a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import jinja2

from advisor.api import AdviseRequest, AdviseResponse, Explanation, MyJobs, Overview
from advisor.daemon.transport import DaemonRefused
from advisor.factory_table import FactoryFailed, factory_table
from advisor.jobscript.lexer import MAX_SCRIPT_BYTES
from advisor.readable import cost
from advisor.recommend.choose import Estimate, describe
from advisor.recommend.cli import advice_words
from advisor.slurm.runner import SlurmError
from advisor.slurm.values import format_seconds
from advisor.submit_guard import added_words
from advisor.web.chart import bars_svg, scatter_svg
from advisor.web.forms import WHERE, directives, read_form, read_pasted, script
from advisor.web.states import StatesLookup

Ask = Callable[[str, str, bytes | None], bytes]
"""One request to the daemon (method, path, body) and its answer's body (`advisor.web.cli` makes one)."""


@dataclass(frozen=True)
class Page:
    status: int
    html: str


@dataclass(frozen=True)
class Viewer:
    """Whom a page is for: the user it shows (the server's own), the CSRF token its forms carry
    (`advisor.web.guard`), and what Slurm says of their jobs, asked as them (None: not asked)."""

    user: str
    csrf: str
    slurm: StatesLookup | None = None


PageMaker = Callable[[Ask, Viewer, Mapping[str, str]], Page]
"""A page of (ask, the viewer, the posted form's fields). A GET has none, but on the pages that only read
(`QUERIED`): a link never runs a comparison (it would run the code a factory names), only a form posted
from the page itself does."""

_FIELDS = (
    ("model", "model (torchvision, or package.module:factory)", "resnet50"),
    ("input_shape", "input shape C,H,W", "3,224,224"),
    ("global_batch", "global batch", "256"),
    ("steps", "optimizer steps", "10000"),
    ("partition", "partition as written", ""),
    ("gpus", "GPUs", "1"),
    ("time", "your time limit", "1-00:00:00"),
)
_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("advisor.web", "templates"), autoescape=True, undefined=jinja2.StrictUndefined
)


def compare(ask: Ask, viewer: Viewer, query: Mapping[str, str]) -> Page:
    """The form's fields, or a pasted script (``script`` and its file's ``script_name``); none: the form."""
    values = {name: query.get(name, default) for name, _label, default in _FIELDS}
    page: dict[str, object] = {"fields": [(n, label, values[n]) for n, label, _ in _FIELDS]}
    page |= {"errors": {}, "problem": None, "result": None, "script": query.get("script", "")}
    page |= {"user": viewer.user, "csrf": viewer.csrf}
    if not query:
        return _render("compare.html", page)
    if "script" in query:
        pasted, error = read_pasted(query["script"], query.get("script_name", ""))
        if pasted is None:
            return _render("compare.html", page | {"errors": {"script": error}}, status=422)
        return _answer(ask, page, pasted.script, pasted.where, "script", [])
    form, errors = read_form(values)
    if form is None:
        return _render("compare.html", page | {"errors": errors}, status=422)
    return _answer(ask, page, script(form), WHERE, "model", directives(form))


def _answer(ask: Ask, page: dict[str, object], text: bytes, where: str, field: str, lines: list[str]) -> Page:
    """The daemon's answer for one script; what is wrong with the script itself shows next to ``field``
    (a factory that cannot be introspected, or the daemon's message with the script's line)."""
    try:
        answer = _preview(ask, text, where, factory_table(text.decode(errors="replace"), where, []))
    except Exception as error:  # the page says what went wrong; it never shows a traceback
        if isinstance(error, FactoryFailed) or (isinstance(error, DaemonRefused) and error.status == 422):
            return _render("compare.html", page | {"errors": {field: str(error)}}, 422)
        return _render("compare.html", page | {"problem": f"the advisor could not answer: {error}"}, 503)
    result, call = answer.recommendation, answer.submission
    adds = _options_to_copy(added_words([where], call.argv, call.env)) if call.rewritten else []
    if not adds and result.advice is not None:
        adds = advice_words(result)
    shown = {"result": result, "lines": "\n".join(lines), "adds": " ".join(adds), "where": where}
    chart = bars_svg(result) if result.candidates else ""
    if not result.candidates:
        shown["problem"] = "; ".join(result.reasons) or "no candidates"
    return _render("compare.html", page | shown | {"chart": chart})


def _options_to_copy(words: list[str]) -> list[str]:
    """The advice as the user adds it to their own sbatch line: a ``--job-name`` is advise-submit's, for
    the script it sends on stdin, and would name every job of theirs after the pasted file."""
    return [word for word in words if not word.startswith("--job-name=")]


def _preview(ask: Ask, text: bytes, where: str, table: dict[str, object] | None) -> AdviseResponse:
    request = AdviseRequest.of(text, where=where, sbatch_argv=[where], preview=True, table=table)
    return AdviseResponse.model_validate_json(
        ask("POST", "/advise", json.dumps(request.model_dump()).encode())
    )


def jobs(ask: Ask, viewer: Viewer, query: Mapping[str, str]) -> Page:
    """The viewer's advised jobs (the daemon knows whose by SO_PEERCRED, never by what a page asks):
    predicted against actual run and wait, each with its name and state as Slurm has them now (an array's
    tasks by state), and a link to why it was advised so."""
    page: dict[str, object] = {"user": viewer.user, "jobs": None, "problem": None, "states": {}}
    try:
        mine = MyJobs.model_validate_json(ask("GET", "/jobs", None))
    except Exception as error:  # the page says what went wrong; it never shows a traceback
        return _render("jobs.html", page | {"problem": f"the advisor could not answer: {error}"}, 503)
    page |= {"jobs": mine.jobs, "user": mine.user, "asked": False}
    if viewer.slurm is not None and mine.jobs:
        since = min(job.submitted_at for job in mine.jobs)
        try:
            page |= {"states": viewer.slurm([job.job_id for job in mine.jobs], since), "asked": True}
        except SlurmError as error:
            page["problem"] = f"Slurm did not answer, the states are the advisor's: {error}"
    return _render("jobs.html", page)


def explain(ask: Ask, viewer: Viewer, query: Mapping[str, str]) -> Page:
    """Why one of the viewer's jobs was advised as it was (``explain?job=ID``, as `advisor explain`)."""
    page: dict[str, object] = {"user": viewer.user, "explanation": None, "problem": None}
    job = query.get("job", "")
    if not job.isdigit():
        return _render("explain.html", page | {"problem": "which job? explain?job=ID"}, 422)
    try:
        explanation = Explanation.model_validate_json(ask("GET", f"/explain/{int(job)}", None))
    except Exception as error:  # the page says what went wrong; it never shows a traceback
        status = error.status if isinstance(error, DaemonRefused) and error.status in (403, 404) else 503
        return _render("explain.html", page | {"problem": f"the advisor could not answer: {error}"}, status)
    result = explanation.recommendation
    return _render("explain.html", page | {"explanation": explanation, "result": result})


def admin(ask: Ask, viewer: Viewer, query: Mapping[str, str]) -> Page:
    """The admins' view; the daemon decides who is one (SO_PEERCRED against its ``admins`` setting)."""
    page: dict[str, object] = {
        "user": viewer.user,
        "view": None,
        "problem": None,
        "scatter": "",
        "refused": None,
    }
    try:
        view = Overview.model_validate_json(ask("GET", "/admin", None))
    except Exception as error:  # the page says what went wrong; it never shows a traceback
        if isinstance(error, DaemonRefused) and error.status == 403:
            return _render("admin.html", page | {"refused": str(error)}, 403)
        return _render("admin.html", page | {"problem": f"the advisor could not answer: {error}"}, 503)
    scatter = scatter_svg(view.finished) if view.finished else ""
    return _render("admin.html", page | {"view": view, "scatter": scatter})


ROUTES: dict[str, PageMaker] = {"": compare, "jobs": jobs, "explain": explain, "admin": admin}
"""Each page by its path below the app's root."""
POSTED = frozenset({""})
"""The pages that take a posted form: the compare page (its form, or a pasted script)."""
QUERIED = frozenset({"explain"})
"""The pages a link's query reaches (a GET's fields): they only read what the daemon kept."""
MAX_FORM_BYTES = 3 * MAX_SCRIPT_BYTES + 2**16
"""A posted form: the largest script sbatch takes, URL-encoded, and its few other fields."""


def problem_page(problem: str, status: int) -> Page:
    return _render("problem.html", {"problem": problem}, status)


def not_found(path: str) -> Page:
    return problem_page(f"no such page: {path[:100]}", 404)


def _render(template: str, page: Mapping[str, object], status: int = 200) -> Page:
    text = _TEMPLATES.get_template(template).render(
        **page,
        describe=describe,
        span=format_seconds,
        optional=_optional,
        money=cost,
        named=_named,
        array_line=_array_line,
    )
    return Page(status, text)


def _named(name: str | None, machine: str) -> str:
    """A machine by its readable name, with its hash's start to tell two of one name apart."""
    return f"{name} ({machine[:8]})" if name else machine


def _array_line(estimate: Estimate, unit: str) -> str:
    """A job array's whole figures in one line, its cost in the policy's unit."""
    assert estimate.array is not None
    return estimate.array.describe(format_seconds, lambda amount: cost(amount, unit))


def _optional(seconds: float | None) -> str:
    return "-" if seconds is None else format_seconds(seconds)
