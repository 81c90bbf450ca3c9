"""A misbehaving daemon on the advisor's socket: it speaks the API but answers whatever a test tells it.

Faults the real daemon cannot produce (a hostile or compromised one, a trickling one) are what the
wrapper must survive. Run as a script (``python fake_daemon.py SOCKET ANSWER_FILE``) it serves one fixed
answer, so a test can start it as another user.
"""

from __future__ import annotations

import json
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any


@dataclass
class Script:
    """What the fake daemon does with each request."""

    status: int = 200
    body: Any = None
    trickle_s: float = 0.0
    """Seconds between the bytes of the answer: a daemon that never quite stops talking."""
    requests: list[tuple[str, Any]] = field(default_factory=list)
    answer: Callable[[str, Any], Any] | None = None
    """The body for (path, request), where it must echo the request (the cli_filter's own sbatch words)."""


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    script: Script


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._answer(None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._answer(json.loads(self.rfile.read(length) or b"null"))

    def _answer(self, request: Any) -> None:
        script = self.server.script
        script.requests.append((self.path, request))
        body = script.body if script.answer is None else script.answer(self.path, request)
        data = json.dumps(body).encode()
        head = f"HTTP/1.1 {script.status} X\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        if not script.trickle_s:
            self.wfile.write(head + data)
            return
        for index in range(len(head + data)):
            self.wfile.write((head + data)[index : index + 1])
            self.wfile.flush()
            time.sleep(script.trickle_s)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serving(socket_path: Path, script: Script) -> Iterator[Script]:
    server = _Server(str(socket_path), _Handler)
    server.script = script
    socket_path.chmod(0o666)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield script
    finally:
        server.shutdown()
        server.server_close()
        socket_path.unlink(missing_ok=True)


class _TcpServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    script: Script


@contextmanager
def serving_tcp(script: Script) -> Iterator[int]:
    """The fake daemon as a cluster-wide service on a loopback port (yielded): it signs nothing."""
    server = _TcpServer(("127.0.0.1", 0), _Handler)
    server.script = script
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    answer = json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))
    with serving(Path(sys.argv[1]), Script(body=answer)):
        threading.Event().wait()
