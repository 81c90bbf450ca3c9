"""`advisor web`: the pages (`advisor.web.pages`) served by aiohttp, asking the daemon over its Unix socket
as the user who runs it (SO_PEERCRED says who).

A personal server (`advisor.web.guard`): a request is answered only when sent to the server's own loopback
name and carrying its token (the printed URL's ``?token=``, kept then in a cookie, or an ``Authorization:
token ...`` header); a form only when posted from the page's own origin with the page's CSRF token.
"""

from __future__ import annotations

import asyncio
import os
import pwd
from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web

from advisor.web.guard import (
    CSRF_FIELD,
    NO_TOKEN,
    SECURITY_HEADERS,
    Door,
    Refusal,
    csrf_token,
    form_refusal,
    host_refusal,
    same,
)
from advisor.web.pages import MAX_FORM_BYTES, POSTED, QUERIED, ROUTES, Ask, PageMaker, Viewer, problem_page
from advisor.web.states import StatesLookup

_ASK: web.AppKey[Ask] = web.AppKey("ask")
_USER = web.AppKey("user", str)
_DOOR = web.AppKey("door", Door)
_SLURM: web.AppKey[StatesLookup | None] = web.AppKey("slurm")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def make_app(
    ask: Ask, door: Door, user: str | None = None, slurm: StatesLookup | None = None
) -> web.Application:
    """``slurm``: what Slurm says of the user's jobs, asked as the user (`advisor.web.states`)."""
    app = web.Application(client_max_size=MAX_FORM_BYTES, middlewares=[_guarded])
    app[_ASK], app[_DOOR], app[_SLURM] = ask, door, slurm
    app[_USER] = user or pwd.getpwuid(os.getuid()).pw_name  # the kernel's, not $USER
    for path, page in ROUTES.items():
        app.router.add_get(f"/{path}", _handler(page, queried=path in QUERIED))
    for path in POSTED:
        app.router.add_post(f"/{path}", _handler(ROUTES[path]))
    return app


@web.middleware
async def _guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The Host and the token, before any page (or a posted body) is read."""
    door = request.app[_DOOR]
    early = _refused(host_refusal(request.headers.get(hdrs.HOST), door.bound, door.port))
    if early is None and request.method == "GET" and same(request.query.get("token"), door.token):
        early = _signed_in(request, door)
    elif early is None and not door.admits(
        request.headers.get(hdrs.AUTHORIZATION), request.cookies.get(door.cookie)
    ):
        early = _refused(NO_TOKEN)
    response = early if early is not None else await handler(request)
    response.headers.update(SECURITY_HEADERS)
    return response


def _signed_in(request: web.Request, door: Door) -> web.Response:
    """The printed URL's token, kept in a cookie no script reads and no other site's request carries; the
    same page again without it, so that it leaves the address bar and the history."""
    kept = request.rel_url.with_query({k: v for k, v in request.query.items() if k != "token"})
    response = web.Response(status=303, headers={hdrs.LOCATION: str(kept)})
    response.set_cookie(door.cookie, door.token, httponly=True, samesite="Strict", path="/")
    return response


def _refused(refusal: Refusal | None) -> web.Response | None:
    if refusal is None:
        return None
    made = problem_page(refusal.message, refusal.status)
    return web.Response(text=made.html, content_type="text/html", status=made.status)


def _handler(page: PageMaker, queried: bool = False) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        app, door = request.app, request.app[_DOOR]
        fields = dict(request.query) if queried else {}
        if request.method == "POST":
            posted = {name: value for name, value in (await request.post()).items() if isinstance(value, str)}
            headers = request.headers
            own = f"http://{request.host}"  # the Host, checked already: the page's own origin
            refused = _refused(
                form_refusal(posted, door.token, headers.get(hdrs.ORIGIN), headers.get(hdrs.REFERER), own)
            )
            if refused is not None:
                return refused
            fields = {name: value for name, value in posted.items() if name != CSRF_FIELD}
        viewer = Viewer(app[_USER], csrf_token(door.token), app[_SLURM])
        # A page waits on the daemon: on a thread, so that one slow answer holds up no other page.
        made = await asyncio.get_running_loop().run_in_executor(None, page, app[_ASK], viewer, fields)
        return web.Response(text=made.html, content_type="text/html", status=made.status)

    return handle
