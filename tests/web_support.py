"""The web app as the tests drive it: in-process, on a loopback port, and in a real headless browser."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import io
import os
import re
import shutil
import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from wsgiref.util import setup_testing_defaults

from aiohttp import web

from advisor.daemon.transport import Service, call
from advisor.web.app import make_app
from advisor.web.guard import Door, new_token
from advisor.web.pages import Ask
from advisor.web.wsgi import make_application

from .daemon_support import Daemon


@dataclass(frozen=True)
class Served:
    """The app on a loopback port, as `advisor web` serves it: its address and its token."""

    host: str
    port: int
    token: str

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def printed(self) -> str:
        """The address `advisor web` prints: the token in it."""
        return f"{self.url}?token={self.token}"


@contextlib.contextmanager
def serving(ask: Ask) -> Iterator[Served]:
    """The app on a free loopback port, in a thread of its own, as `advisor web` serves it."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    served = Served("127.0.0.1", port, new_token())
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(make_app(ask, Door(served.token, "127.0.0.1", port), user="alice"))
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.SockSite(runner, listening).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


@dataclass
class Client:
    """A browser's requests without the browser: it opens the printed address (the token becomes a
    cookie), reads each page's CSRF token, and posts forms from the page's own origin, all of which a
    test may change."""

    served: Served
    cookies: dict[str, str] = field(default_factory=dict)
    csrf: str = ""

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, dict[str, str], str]:
        connection = http.client.HTTPConnection(self.served.host, self.served.port, timeout=120)
        sent = {"Host": f"{self.served.host}:{self.served.port}"}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        sent |= headers or {}
        try:
            connection.request(method, path, body, {name: value for name, value in sent.items() if value})
            response = connection.getresponse()
            text = response.read().decode()
        finally:
            connection.close()
        for header, value in response.getheaders():
            if header.lower() == "set-cookie":
                name, _, rest = value.partition("=")
                self.cookies[name] = rest.split(";")[0]
        found = re.search(r'name="csrf" value="([^"]*)"', text)
        self.csrf = found.group(1) if found else self.csrf
        return response.status, {name.lower(): value for name, value in response.getheaders()}, text

    def sign_in(self) -> Client:
        status, headers, _ = self.request("GET", f"/?token={self.served.token}")
        assert status == 303 and headers["location"] == "/", (status, headers)
        return self

    def get(self, path: str = "/") -> tuple[int, str]:
        status, _, text = self.request("GET", path)
        return status, text

    def post(
        self, fields: Mapping[str, str], path: str = "/", headers: Mapping[str, str] | None = None
    ) -> tuple[int, str]:
        if not self.csrf:
            self.get(path)
        body = urlencode({"csrf": self.csrf, **fields}).encode()
        sent = {"Content-Type": "application/x-www-form-urlencoded", "Origin": self.served.url.rstrip("/")}
        status, _, text = self.request("POST", path, body, sent | dict(headers or {}))
        return status, text


def get(ask: Ask, path: str = "/") -> tuple[int, str]:
    """A page, as the user who started the server sees it."""
    with serving(ask) as served:
        return Client(served).sign_in().get(path)


def post(ask: Ask, fields: dict[str, str]) -> tuple[int, str]:
    """The compare page's form (its fields, or a pasted script), posted as a browser posts it."""
    with serving(ask) as served:
        return Client(served).sign_in().post(fields)


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,1400"):
        options.add_argument(flag)
    options.binary_location = shutil.which("chromium") or "chromium"
    return webdriver.Chrome(options=options, service=DriverService(shutil.which("chromedriver")))


def asker(daemon: Daemon) -> Ask:
    """The daemon as `advisor web` asks it, over its socket, with a loaded machine's patience."""

    def ask(method: str, path: str, body: bytes | None) -> bytes:
        return call(Service(daemon.socket), method, path, body, 60)

    return ask


def down(method: str, path: str, body: bytes | None) -> bytes:
    raise ConnectionRefusedError("no daemon at /run/advisor/advisor.sock")


def screenshot(ask: Ask, page: str, name: str, height: int, elsewhere: Path) -> None:
    """The page as Debian's headless chromium draws it, saved as ``name`` in $ADVISOR_SCREENSHOTS (the
    README's pictures: an absolute path, as the tests run in their own folders), else in ``elsewhere``."""
    if shutil.which("chromedriver") is None:
        return
    shots = Path(os.environ.get("ADVISOR_SCREENSHOTS", elsewhere))
    shots.mkdir(parents=True, exist_ok=True)
    with serving(ask) as served:
        shown = browser()
        try:
            shown.set_window_size(1200, height)
            shown.get(served.printed)
            shown.get(served.url + page)
            shown.save_screenshot(str(shots / name))
        finally:
            shown.quit()


OOD = "https://ondemand.example"


def ood(
    path: str,
    method: str = "GET",
    form: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    user: str = "alice",
) -> tuple[str, dict[str, str], str]:
    """One request as OnDemand's proxy passes it to the app of ``user`` (its process's user, alice): the
    user it logged in, the host and scheme the browser used; a form posted as the compare page posts it,
    with the session cookie and CSRF token of the page it was sent from. ``headers`` change any of it ("":
    left out)."""
    environ: dict[str, object] = {"SCRIPT_NAME": "/pun/sys/advisor", "PATH_INFO": path}
    environ |= {"REQUEST_METHOD": method, "HTTP_HOST": "ondemand.example"}
    environ |= {"HTTP_X_FORWARDED_USER": "alice", "HTTP_X_FORWARDED_PROTO": "https"}
    environ |= {"HTTP_X_FORWARDED_HOST": "ondemand.example"}
    if form is not None:
        status, sent, page = ood("/", user=user)
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert status == "200 OK" and csrf is not None, page
        environ |= {"HTTP_COOKIE": sent["Set-Cookie"].split(";")[0], "HTTP_ORIGIN": OOD}
        body = urlencode({"csrf": csrf.group(1), **form}).encode()
        environ |= {"CONTENT_TYPE": "application/x-www-form-urlencoded", "CONTENT_LENGTH": str(len(body))}
        environ["wsgi.input"] = io.BytesIO(body)
    for name, value in (headers or {}).items():
        environ.pop(name, None)
        environ |= {name: value} if value else {}
    setup_testing_defaults(environ)
    answer: dict[str, object] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answer.update(status=status, headers=dict(headers))

    body = b"".join(make_application(down, user)(environ, start_response))
    return str(answer["status"]), dict(answer["headers"]), body.decode()  # type: ignore[call-overload]
