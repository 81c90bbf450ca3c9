"""The web app: an aiohttp server of Jinja2 pages that asks the daemon over its Unix socket as the user
who runs it (SO_PEERCRED says who; the page adds no authentication and no trust of its own).

The daemon is asked for a preview: answered like `advise-submit`'s request, never audited, never
submitted. Nothing on a page submits a job.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
from collections.abc import Callable, Mapping

import jinja2
from aiohttp import web

from advisor.api import AdviseRequest, AdviseResponse, MyJobs
from advisor.recommend.choose import describe
from advisor.slurm.values import format_seconds
from advisor.web.chart import bars_svg
from advisor.web.forms import Compare, directives, read_form, script

Ask = Callable[[str, str, bytes | None], bytes]
"""One request to the daemon (method, path, body) and its answer's body (`advisor.web.cli` makes one)."""

_FIELDS = (
    ("model", "model (torchvision)", "resnet50"),
    ("input_shape", "input shape C,H,W", "3,224,224"),
    ("global_batch", "global batch", "256"),
    ("steps", "optimizer steps", "10000"),
    ("partition", "partition as written", ""),
    ("gpus", "GPUs", "1"),
    ("time", "your time limit", "1-00:00:00"),
)
_PAGES = jinja2.Environment(
    loader=jinja2.PackageLoader("advisor.web", "templates"), autoescape=True, undefined=jinja2.StrictUndefined
)
WHERE = "compare.sbatch"
_ASK: web.AppKey[Ask] = web.AppKey("ask")
_USER = web.AppKey("user", str)


def make_app(ask: Ask, user: str | None = None) -> web.Application:
    app = web.Application()
    app[_ASK], app[_USER] = ask, user or pwd.getpwuid(os.getuid()).pw_name  # the kernel's, not $USER
    app.router.add_get("/", compare_page)
    app.router.add_get("/jobs", jobs_page)
    return app


async def compare_page(request: web.Request) -> web.Response:
    values = {name: request.query.get(name, default) for name, _label, default in _FIELDS}
    page: dict[str, object] = {"fields": [(n, label, values[n]) for n, label, _ in _FIELDS]}
    page |= {"errors": {}, "problem": None, "result": None, "user": request.app[_USER]}
    if not request.query:
        return _render(page)
    form, errors = read_form(values)
    if form is None:
        return _render(page | {"errors": errors}, status=422)
    try:
        answer = await asyncio.get_running_loop().run_in_executor(None, _preview, request.app[_ASK], form)
    except Exception as error:  # the page says what went wrong; it never shows a traceback
        return _render(page | {"problem": f"the advisor could not answer: {error}"}, status=503)
    result = answer.recommendation
    shown = {"result": result, "lines": "\n".join(directives(form))}
    chart = bars_svg(result) if result.candidates else ""
    if not result.candidates:
        shown["problem"] = "; ".join(result.reasons) or "no candidates"
    return _render(page | shown | {"chart": chart})


def _preview(ask: Ask, form: Compare) -> AdviseResponse:
    request = AdviseRequest.of(script(form), where=WHERE, sbatch_argv=[WHERE], preview=True)
    return AdviseResponse.model_validate_json(
        ask("POST", "/advise", json.dumps(request.model_dump()).encode())
    )


async def jobs_page(request: web.Request) -> web.Response:
    """The caller's advised jobs: predicted against actual run and wait."""
    page: dict[str, object] = {"user": request.app[_USER], "jobs": None, "problem": None}
    ask = request.app[_ASK]
    try:
        body = await asyncio.get_running_loop().run_in_executor(None, ask, "GET", "/jobs", None)
        mine = MyJobs.model_validate_json(body)
    except Exception as error:  # the page says what went wrong; it never shows a traceback
        return _render(page | {"problem": f"the advisor could not answer: {error}"}, "jobs.html", 503)
    return _render(page | {"jobs": mine.jobs, "user": mine.user}, "jobs.html")


def _render(page: Mapping[str, object], template: str = "compare.html", status: int = 200) -> web.Response:
    text = _PAGES.get_template(template).render(
        **page, describe=describe, span=format_seconds, optional=_optional
    )
    return web.Response(text=text, content_type="text/html", status=status)


def _optional(seconds: float | None) -> str:
    return "-" if seconds is None else format_seconds(seconds)
