"""The pages as a WSGI application: what Open OnDemand's Passenger runs (``ood/advisor/passenger_wsgi.py``),
as the logged-in user, below ``/pun/sys/advisor/``."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable
from functools import cache
from http import HTTPStatus
from urllib.parse import parse_qsl
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from advisor.settings import SettingsError, load_settings
from advisor.web.daemon import daemon_ask
from advisor.web.pages import MAX_FORM_BYTES, POSTED, ROUTES, Ask, Page, not_found, problem_page


def make_application(ask: Ask, user: str) -> WSGIApplication:
    def application(environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        if not path:  # the app's root without its slash: relative links need the slash
            start_response("301 Moved Permanently", [("Location", environ.get("SCRIPT_NAME", "") + "/")])
            return []
        name = path.removeprefix("/")
        maker = ROUTES.get(name)
        if maker is None:
            return _respond(start_response, not_found(path))
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD") and not (method == "POST" and name in POSTED):
            return _respond(start_response, problem_page("the pages only show: nothing here is sent", 405))
        query = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        if method == "POST":
            posted = _posted(environ)
            if isinstance(posted, Page):
                return _respond(start_response, posted)
            query |= posted
        return _respond(start_response, maker(ask, user, query))

    return application


def _posted(environ: WSGIEnvironment) -> dict[str, str] | Page:
    """A posted form's fields, or the page that refuses it."""
    if environ.get("CONTENT_TYPE", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return problem_page("a form is posted URL-encoded, as the compare page posts it", 415)
    length = environ.get("CONTENT_LENGTH") or "0"
    if not length.isdigit() or int(length) > MAX_FORM_BYTES:
        return problem_page(f"a posted form has at most {MAX_FORM_BYTES // 2**20} MiB", 413)
    body = environ["wsgi.input"].read(int(length)).decode("utf-8", errors="replace")
    return dict(parse_qsl(body, keep_blank_values=True))


def application(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
    """Passenger's entry point: the settings as every advisor command reads them (``ADVISOR_CONFIG``,
    ``/etc/advisor/advisor.toml``, the ``ADVISOR_*`` variables), read once."""
    try:
        served = _served()
    except SettingsError as error:
        return _respond(start_response, problem_page(f"the advisor's settings cannot be used: {error}", 500))
    return served(environ, start_response)


@cache
def _served() -> WSGIApplication:
    user = pwd.getpwuid(os.getuid()).pw_name  # the kernel's, not $USER
    return make_application(daemon_ask(load_settings(os.environ)), user)


def _respond(start_response: StartResponse, page: Page) -> list[bytes]:
    body = page.html.encode()
    headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))]
    start_response(f"{page.status} {HTTPStatus(page.status).phrase}", headers)
    return [body]
