"""`advisor web`: serve the pages on this host, as the user who runs it."""

from __future__ import annotations

import argparse

from rich.console import Console

from advisor.settings.validated import Settings


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    web = commands.add_parser("web", help="the advisor in a browser: compare partitions for a model")
    web.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")
    web.add_argument("--port", type=int, default=8765, help="port (default %(default)s)")
    web.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace, console: Console) -> int:
    from aiohttp import web

    from advisor.web.app import make_app
    from advisor.web.daemon import daemon_ask

    console.print(f"advisor web on http://{args.host}:{args.port}/ (Ctrl-C stops it)", highlight=False)
    web.run_app(make_app(daemon_ask(args.settings)), host=args.host, port=args.port, print=None)
    return 0
