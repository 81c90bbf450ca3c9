"""The web app as the tests drive it: in-process, on a loopback port, and in a real headless browser."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from advisor.daemon.transport import Service, call
from advisor.web.app import make_app
from advisor.web.pages import Ask

from .daemon_support import Daemon


def get(ask: Ask, query: dict[str, str], path: str = "/") -> tuple[int, str]:
    async def fetch() -> tuple[int, str]:
        async with TestClient(TestServer(make_app(ask, user="alice"))) as client:
            response = await client.get(path, params=query)
            return response.status, await response.text()

    return asyncio.run(fetch())


def post(ask: Ask, fields: dict[str, str]) -> tuple[int, str]:
    """The compare page's pasted-script form, posted as a browser posts it."""

    async def fetch() -> tuple[int, str]:
        async with TestClient(TestServer(make_app(ask, user="alice"))) as client:
            response = await client.post("/", data=fields)
            return response.status, await response.text()

    return asyncio.run(fetch())


@contextlib.contextmanager
def serving(ask: Ask) -> Iterator[str]:
    """The app on a free loopback port, in a thread of its own, as `advisor web` serves it."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(make_app(ask, user="alice"))
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


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
    with serving(ask) as url:
        shown = browser()
        try:
            shown.set_window_size(1200, height)
            shown.get(url + page)
            shown.save_screenshot(str(shots / name))
        finally:
            shown.quit()
