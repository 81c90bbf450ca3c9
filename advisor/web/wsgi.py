"""The pages as a WSGI application: what Open OnDemand's Passenger runs (``ood/advisor/passenger_wsgi.py``),
as the logged-in user, in that user's own per-user NGINX (PUN), below ``/pun/sys/advisor/``.

OnDemand's Apache logs the user in and proxies to the PUN of the system user it maps them to, naming
that user in ``X-Forwarded-User`` (a WSGI server that authenticates itself sets ``REMOTE_USER``): the
app answers only when every such name is its own process's user (`advisor.web.guard`). A form is taken
only from the page's own origin, the one the browser used: ``X-Forwarded-Proto`` (OnDemand's proxy sets
it) and the last ``X-Forwarded-Host`` (the Host the proxy itself was sent; it keeps it as ``Host`` too),
and only with the CSRF token its page carried, made from a random session cookie kept for the app's path
(a per-process secret would not do: Passenger may run several processes for one user). OnDemand's Apache
decides which host names it serves, so the app checks no Host of its own.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable
from functools import cache
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from advisor.settings import SettingsError, load_settings
from advisor.web.daemon import daemon_ask
from advisor.web.guard import (
    CSRF_FIELD,
    SECURITY_HEADERS,
    csrf_token,
    form_refusal,
    new_token,
    user_refusal,
)
from advisor.web.pages import (
    MAX_FORM_BYTES,
    POSTED,
    QUERIED,
    ROUTES,
    Ask,
    Page,
    Viewer,
    not_found,
    problem_page,
)
from advisor.web.states import StatesLookup, viewers_slurm

SESSION_COOKIE = "advisor-session"


def make_application(ask: Ask, user: str, slurm: StatesLookup | None = None) -> WSGIApplication:
    """The app for ``user``, the system user its process runs as; ``slurm`` asks Slurm as ``user``."""

    def application(environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        claimed = [environ.get(name, "") for name in ("REMOTE_USER", "HTTP_X_FORWARDED_USER")]
        refused = user_refusal([name for name in claimed if name], user)
        if refused is not None:
            return _respond(start_response, problem_page(refused.message, refused.status))
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
        session, cookie = _session(environ)
        fields = dict(parse_qsl(environ.get("QUERY_STRING", ""))) if name in QUERIED else {}
        if method == "POST":
            posted = _posted(environ, session)
            if isinstance(posted, Page):
                return _respond(start_response, posted, cookie)
            fields = posted
        return _respond(start_response, maker(ask, Viewer(user, csrf_token(session), slurm), fields), cookie)

    return application


def _session(environ: WSGIEnvironment) -> tuple[str, str | None]:
    """The browser's session secret, and the Set-Cookie that gives it one where it has none yet."""
    try:
        kept = SimpleCookie(environ.get("HTTP_COOKIE", "")).get(SESSION_COOKIE)
    except CookieError:
        kept = None
    if kept is not None and len(kept.value) >= 32:
        return kept.value, None
    session = new_token()
    secure = "; Secure" if _scheme(environ) == "https" else ""
    path = environ.get("SCRIPT_NAME", "") + "/"
    return session, f"{SESSION_COOKIE}={session}; Path={path}; HttpOnly; SameSite=Strict{secure}"


def _scheme(environ: WSGIEnvironment) -> str:
    return str(environ.get("HTTP_X_FORWARDED_PROTO") or environ.get("wsgi.url_scheme", "http"))


def _own_origin(environ: WSGIEnvironment) -> str:
    """The origin the browser used: behind OnDemand's proxy, the last forwarded host (the one it was
    sent; a client's own X-Forwarded-Host comes before it), else the Host."""
    forwarded = [host.strip() for host in environ.get("HTTP_X_FORWARDED_HOST", "").split(",") if host.strip()]
    host = forwarded[-1] if forwarded else environ.get("HTTP_HOST", "")
    return f"{_scheme(environ)}://{host}"


def _posted(environ: WSGIEnvironment, session: str) -> dict[str, str] | Page:
    """A posted form's fields, or the page that refuses it."""
    if environ.get("CONTENT_TYPE", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return problem_page("a form is posted URL-encoded, as the compare page posts it", 415)
    length = environ.get("CONTENT_LENGTH") or "0"
    if not length.isdigit() or int(length) > MAX_FORM_BYTES:
        return problem_page(f"a posted form has at most {MAX_FORM_BYTES // 2**20} MiB", 413)
    body = environ["wsgi.input"].read(int(length)).decode("utf-8", errors="replace")
    posted = dict(parse_qsl(body, keep_blank_values=True))
    origin, referer = environ.get("HTTP_ORIGIN"), environ.get("HTTP_REFERER")
    refused = form_refusal(posted, session, origin, referer, _own_origin(environ))
    if refused is not None:
        return problem_page(refused.message, refused.status)
    return {name: value for name, value in posted.items() if name != CSRF_FIELD}


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
    settings = load_settings(os.environ)
    return make_application(daemon_ask(settings), user, viewers_slurm(settings.slurm, user))


def _respond(start_response: StartResponse, page: Page, cookie: str | None = None) -> list[bytes]:
    body = page.html.encode()
    headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))]
    headers += [*SECURITY_HEADERS, *([("Set-Cookie", cookie)] if cookie else [])]
    start_response(f"{page.status} {HTTPStatus(page.status).phrase}", headers)
    return [body]
