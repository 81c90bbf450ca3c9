"""`advisor web`: serve the pages on this host, to the user who runs it only.

The compare page runs the code a factory names (`advisor.factory_table`) as whoever runs the server, so
the server is personal, as Jupyter's is: it listens on loopback (or a Unix socket only its user may open),
answers only requests that carry the token it prints (`advisor.web.guard`), and never runs as root.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import socket
import sys
from pathlib import Path

from rich.console import Console

from advisor.settings.validated import Settings
from advisor.web.guard import Door, is_loopback, new_token, url_host

_TUNNEL_PORT = 8765


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    web = commands.add_parser(
        "web",
        help="the advisor in a browser: compare partitions for a model (a personal server)",
        description="Serve the advisor's pages to you alone: on a loopback address (or a Unix socket), to "
        "the browser that opens the address it prints (its token changes at every start). Reach it from "
        "another machine through an SSH tunnel. It never runs as root.",
    )
    web.add_argument(
        "--host", default="127.0.0.1", help="a loopback address to listen on (default %(default)s)"
    )
    web.add_argument("--port", type=int, default=8765, help="port (default %(default)s; 0: any free one)")
    web.add_argument(
        "--socket",
        type=Path,
        metavar="PATH",
        help="listen on this Unix socket instead (made 0600: only you may open it)",
    )
    web.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace, console: Console) -> int:
    if args.socket is None and not is_loopback(args.host):
        print(
            f"advisor: error: --host {args.host} is not a loopback address: the page runs your code, so it "
            "listens on this host only (127.0.0.1, ::1 or localhost). From another machine, tunnel to it: "
            f"ssh -L {args.port}:127.0.0.1:{args.port} THIS-HOST",
            file=sys.stderr,
        )
        return 2
    if os.geteuid() == 0:
        print(
            "advisor: error: advisor web does not run as root: its page runs the code that a script's "
            "factory names as the user who serves it. Run it as yourself, for yourself.",
            file=sys.stderr,
        )
        return 1
    try:
        listening = (
            unix_listener(args.socket) if args.socket is not None else _tcp_socket(args.host, args.port)
        )
    except OSError as error:
        where = args.socket if args.socket is not None else f"{args.host}:{args.port}"
        print(f"advisor: error: advisor web cannot listen on {where}: {error.strerror}", file=sys.stderr)
        return 1
    return _run(args, console, listening)


def _run(args: argparse.Namespace, console: Console, listening: socket.socket) -> int:
    from aiohttp import web

    from advisor.web.app import make_app
    from advisor.web.daemon import daemon_ask
    from advisor.web.states import viewers_slurm

    token = new_token()
    if args.socket is None:
        port = int(listening.getsockname()[1])
        door = Door(token, args.host, port)
        console.print(
            f"advisor web, for you only: open http://{url_host(args.host)}:{port}/?token={token} (the token "
            "is new at every start; Ctrl-C stops it)",
            highlight=False,
            soft_wrap=True,
        )
    else:
        door = Door(token, "localhost", None)
        console.print(
            f"advisor web on {args.socket}, for you only. Tunnel to it (ssh -L {_TUNNEL_PORT}:{args.socket} "
            f"THIS-HOST), then open http://localhost:{_TUNNEL_PORT}/?token={token} (Ctrl-C stops it)",
            highlight=False,
            soft_wrap=True,
        )
    try:
        user = pwd.getpwuid(os.getuid()).pw_name  # the kernel's, not $USER
        slurm = viewers_slurm(args.settings.slurm, user)
        web.run_app(make_app(daemon_ask(args.settings), door, user, slurm), sock=listening, print=None)
    finally:
        if args.socket is not None:
            with contextlib.suppress(FileNotFoundError):
                args.socket.unlink()
    return 0


def _tcp_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind((host.strip("[]"), port))
    return listening


def unix_listener(path: Path) -> socket.socket:
    """Bound with no permission for anyone else from its first moment (a umask, not a chmod after)."""
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    before = os.umask(0o177)
    try:
        listening.bind(str(path))
    finally:
        os.umask(before)
    return listening
