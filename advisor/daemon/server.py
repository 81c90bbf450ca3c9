"""The daemon's HTTP server on a Unix socket: routing, JSON in and out, signals, and a clean stop.

One thread per request (the standard library's ThreadingMixIn); each request's caller comes from
SO_PEERCRED. SIGHUP reloads the policy, SIGTERM and SIGINT stop the server after current requests.
"""

from __future__ import annotations

import logging
import signal
import socketserver
import stat
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from advisor.api import AdviseRequest, Problem, Submitted
from advisor.daemon.app import Advisor, Forbidden, RequestError
from advisor.daemon.transport import Peer, check_socket_directory, peer_credentials
from advisor.introspect.errors import IntrospectionError
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import MAX_SCRIPT_BYTES
from advisor.slurm.runner import SlurmError

log = logging.getLogger("advisor.daemon")
_M = TypeVar("_M", bound=BaseModel)
_MAX_BODY = 2 * MAX_SCRIPT_BYTES


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 1024
    """A burst of submissions queues in the kernel instead of being refused (the default is 5)."""
    block_on_close = True
    advisor: Advisor


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        advisor = self.server.advisor
        if self.path == "/health":
            self._reply(HTTPStatus.OK, advisor.health())
        elif self.path.startswith("/explain/") and self.path.removeprefix("/explain/").isdigit():
            job_id = int(self.path.removeprefix("/explain/"))
            self._answer(lambda: advisor.explain(self._peer(), job_id))
        else:
            self._reply(HTTPStatus.NOT_FOUND, Problem(error=f"no such endpoint: GET {self.path}"))

    def do_POST(self) -> None:
        advisor = self.server.advisor
        if self.path == "/advise":
            body = self._body(AdviseRequest)
            if body is not None:
                self._answer(lambda: advisor.advise(self._peer(), body))
        elif self.path == "/submitted":
            submitted = self._body(Submitted)
            if submitted is not None:
                self._answer(lambda: advisor.submitted(self._peer(), submitted))
        else:
            self._reply(HTTPStatus.NOT_FOUND, Problem(error=f"no such endpoint: POST {self.path}"))

    def _peer(self) -> Peer:
        return peer_credentials(self.connection)

    def _body(self, model: type[_M]) -> _M | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, Problem(error=f"request over {_MAX_BODY} bytes"))
            return None
        try:
            return model.model_validate_json(self.rfile.read(length))
        except ValidationError as error:
            self._reply(HTTPStatus.BAD_REQUEST, Problem(error=f"malformed request: {error}"))
            return None

    def _answer(self, call: Any) -> None:
        try:
            self._reply(HTTPStatus.OK, call())
        except (ScriptError, RequestError, IntrospectionError, ValidationError) as error:
            self._reply(HTTPStatus.UNPROCESSABLE_ENTITY, Problem(error=str(error)))
        except Forbidden as error:
            self._reply(HTTPStatus.FORBIDDEN, Problem(error=str(error)))
        except LookupError as error:
            self._reply(HTTPStatus.NOT_FOUND, Problem(error=str(error)))
        except SlurmError as error:
            self._reply(HTTPStatus.BAD_GATEWAY, Problem(error=f"Slurm: {error}"))
        except Exception as error:  # a bug must cost one request, never the daemon
            log.exception("request %s failed", self.path)
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, Problem(error=f"internal error: {error!r}"))

    def _reply(self, status: HTTPStatus, payload: BaseModel) -> None:
        data = payload.model_dump_json().encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)


def serve(advisor: Advisor, socket_path: Path) -> None:
    """Listens until SIGTERM or SIGINT; the socket is connectable by every user (callers are told apart
    by SO_PEERCRED, not by file permissions)."""
    check_socket_directory(socket_path.parent)
    # Handlers first: a SIGHUP that arrives once the socket exists must reload, not kill.
    stop = threading.Event()

    def on_signal(number: int, _frame: FrameType | None) -> None:
        if number == signal.SIGHUP:
            advisor.reload()
            log.info(
                "policy reloaded%s", f": {advisor.policy.last_error}" if advisor.policy.last_error else ""
            )
        else:
            stop.set()

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, on_signal)
    if socket_path.exists() or socket_path.is_symlink():
        if not stat.S_ISSOCK(socket_path.lstat().st_mode):
            raise FileExistsError(f"{socket_path} exists and is not a socket")
        socket_path.unlink()
    server = _Server(str(socket_path), _Handler)
    server.advisor = advisor
    socket_path.chmod(0o666)
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    log.info("listening on %s", socket_path)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        server.shutdown()
        server.server_close()
        socket_path.unlink(missing_ok=True)
        log.info("stopped")
