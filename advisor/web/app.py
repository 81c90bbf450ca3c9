"""`advisor web`: the pages (`advisor.web.pages`) served by aiohttp, asking the daemon over its Unix socket
as the user who runs it (SO_PEERCRED says who; the app adds no authentication and no trust of its own)."""

from __future__ import annotations

import asyncio
import os
import pwd
from collections.abc import Awaitable, Callable

from aiohttp import web

from advisor.web.pages import MAX_FORM_BYTES, POSTED, ROUTES, Ask, PageMaker

_ASK: web.AppKey[Ask] = web.AppKey("ask")
_USER = web.AppKey("user", str)


def make_app(ask: Ask, user: str | None = None) -> web.Application:
    app = web.Application(client_max_size=MAX_FORM_BYTES)
    app[_ASK], app[_USER] = ask, user or pwd.getpwuid(os.getuid()).pw_name  # the kernel's, not $USER
    for path, page in ROUTES.items():
        app.router.add_get(f"/{path}", _handler(page))
    for path in POSTED:
        app.router.add_post(f"/{path}", _handler(ROUTES[path]))
    return app


def _handler(page: PageMaker) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        # A page waits on the daemon: on a thread, so that one slow answer holds up no other page.
        query, app = dict(request.query), request.app
        if request.method == "POST":
            query |= {name: value for name, value in (await request.post()).items() if isinstance(value, str)}
        made = await asyncio.get_running_loop().run_in_executor(None, page, app[_ASK], app[_USER], query)
        return web.Response(text=made.html, content_type="text/html", status=made.status)

    return handle
