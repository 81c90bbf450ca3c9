"""The daemon's HTTP server on a Unix socket: aiohttp's low-level server, routing, limits and a clean stop.

aiohttp parses every request strictly (a negative or non-numeric Content-Length, a header over 8 KiB or
a broken request line is a 400 before any code of ours runs) and serves every connection from one event
loop, so an idle connection costs a file descriptor, not a thread. On top of it: a cap on connections in
all and per caller (the caller's uid from SO_PEERCRED), a deadline by which each connection must have
been answered, a body cap, and a bounded thread pool for the advice itself; a request that cannot be
answered within the caller's budget (`BUDGET_HEADER`) is told so at once (503) instead of queueing past it.
SIGHUP reloads the policy, SIGTERM and SIGINT stop the server after current requests.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import signal
import socket
import stat
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler
from pydantic import BaseModel, ValidationError

from advisor.api import AdviseRequest, ErrorAnswer, Submitted
from advisor.daemon import munge
from advisor.daemon.app import AdviceService, Forbidden, RequestError
from advisor.daemon.limits import Limits
from advisor.daemon.metrics import CONTENT_TYPE
from advisor.daemon.transport import BUDGET_HEADER, Peer, check_socket_directory, peer_credentials
from advisor.introspect.errors import IntrospectionError
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import MAX_SCRIPT_BYTES
from advisor.slurm.runner import SlurmError

log = logging.getLogger("advisor.daemon")
_M = TypeVar("_M", bound=BaseModel)
_B = TypeVar("_B", bound=BaseModel | None)
MAX_BODY = 2 * MAX_SCRIPT_BYTES
DEFAULT_BUDGET_S = 10.0
_PEER, _RAW = "advisor.peer", "advisor.body"
"""A TCP request's caller, from its MUNGE credential, and the body that credential was checked against."""
_EXPLAIN = re.compile(r"/explain/([0-9]{1,10})")
"""Slurm's job ids are 32-bit: a longer number is no job of anyone's."""


class _Server(web.Server):
    """aiohttp's server, counting connections by caller: one over a limit is closed before it is read."""

    def __init__(self, handler: Any, limits: Limits, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.limits = limits
        self.peers: dict[RequestHandler, tuple[Peer | None, str, asyncio.TimerHandle]] = {}
        """Each open connection's caller (None over TCP, where each request's credential names it), what
        its connections are counted under, and the timer that closes it at the deadline."""
        self.per_caller: Counter[str] = Counter()

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        sock = transport.get_extra_info("socket")
        peer = peer_credentials(sock) if sock.family == socket.AF_UNIX else None
        caller = f"uid {peer.uid}" if peer is not None else f"host {transport.get_extra_info('peername')[0]}"
        loop = asyncio.get_running_loop()
        self.peers[handler] = (peer, caller, loop.call_later(self.limits.deadline_s, handler.force_close))
        self.per_caller[caller] += 1
        mine, limits = self.per_caller[caller], self.limits
        if len(self.peers) > limits.connections or mine > limits.connections_per_uid:
            if mine == limits.connections_per_uid + 1 or len(self.peers) == limits.connections + 1:
                log.warning("refusing connections of %s: %d open", caller, mine)
            # Once aiohttp has set the connection up: closed from within this call it would trip it.
            loop.call_soon(handler.force_close)

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        if handler not in self.peers:
            return
        _, caller, deadline = self.peers.pop(handler)
        deadline.cancel()
        self.per_caller[caller] -= 1
        if not self.per_caller[caller]:
            del self.per_caller[caller]


class _CallerFaults(logging.Filter):
    """A request aiohttp refuses as malformed is the caller's fault: one line at INFO, not a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        fault = record.exc_info[1] if record.exc_info else None
        if isinstance(fault, HttpProcessingError):
            record.msg, record.args, record.exc_info = (
                "refused a malformed request: %s",
                (fault.message,),
                None,
            )
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


class _Routes:
    """The endpoints of `advisor.api`; the advice runs on the pool, everything else on the loop."""

    def __init__(self, advisor: AdviceService, workers: int, munge_socket: Path | None = None) -> None:
        self.advisor = advisor
        self.workers = workers
        self.munge_socket = munge_socket
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="advise")
        self.server: _Server | None = None
        self.waiting = 0
        """Advice computations queued or running on the pool."""
        self.service_s = 0.05
        """A running mean of how long one takes, for the wait a new request would have."""

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        began, endpoint = time.monotonic(), _endpoint(request.path)
        over_tcp = self._connection_peer(request) is None
        try:
            if over_tcp and endpoint not in ("/health", "/metrics"):
                request[_PEER] = await self._munge_caller(request)
            response = await self._route(request)
        except _Refusal as refusal:
            response = _reply(refusal.status, ErrorAnswer(error=refusal.message))
        if over_tcp and isinstance(response, web.Response):
            await self._sign(response)
        metrics = self.advisor.metrics
        metrics.requests.labels(endpoint, str(response.status)).inc()
        metrics.latency.labels(endpoint).observe(time.monotonic() - began)
        if endpoint == "/advise" and response.status != HTTPStatus.OK:
            metrics.fail_open.inc()
        return response

    async def _route(self, request: web.BaseRequest) -> web.StreamResponse:
        path, method = request.path, request.method
        if (method, path) == ("GET", "/health"):
            return _reply(HTTPStatus.OK, self.advisor.health())
        if (method, path) == ("GET", "/metrics"):
            return await _metrics(self.advisor)
        if method == "GET" and (match := _EXPLAIN.fullmatch(path)):
            job_id = int(match[1])
            return await self._answer(request, lambda peer: self.advisor.explain(peer, job_id))
        if (method, path) == ("POST", "/advise"):
            advise = await _body(request, AdviseRequest)
            status, ready = _outcome(
                lambda peer: self.advisor.advise_if_ready(peer, advise), self._peer(request)
            )
            if ready is not None:  # a fresh answer (or an error): no thread, no wait
                return _reply(status, ready)
            return await self._answer(request, lambda peer: self.advisor.advise(peer, advise))
        if (method, path) == ("GET", "/jobs"):
            return await self._answer(request, self.advisor.my_jobs)
        if (method, path) == ("GET", "/admin"):
            return await self._answer(request, self.advisor.overview)
        if (method, path) == ("POST", "/submitted"):
            submitted = await _body(request, Submitted)
            return await self._answer(request, lambda peer: self.advisor.submitted(peer, submitted))
        return _reply(HTTPStatus.NOT_FOUND, ErrorAnswer(error=f"no such endpoint: {method} {path[:100]}"))

    async def _answer(self, request: web.BaseRequest, work: Callable[[Peer], BaseModel]) -> web.Response:
        peer = self._peer(request)
        budget = _budget(request)
        expected = self.waiting / self.workers * self.service_s
        if expected > budget:
            raise _Refusal(HTTPStatus.SERVICE_UNAVAILABLE, f"the advisor is busy (about {expected:.1f} s)")
        self.waiting += 1
        began = time.monotonic()
        future = asyncio.get_running_loop().run_in_executor(self.pool, _outcome, work, peer)
        try:
            status, payload = await asyncio.wait_for(asyncio.shield(future), budget)
        except TimeoutError:
            future.add_done_callback(lambda _: self._done(began))
            raise _Refusal(HTTPStatus.SERVICE_UNAVAILABLE, f"no answer within {budget:.1f} s") from None
        self._done(began)
        return _reply(status, payload)

    def _connection_peer(self, request: web.BaseRequest) -> Peer | None:
        assert self.server is not None
        return self.server.peers[request.protocol][0]

    def _peer(self, request: web.BaseRequest) -> Peer:
        peer = self._connection_peer(request) or request.get(_PEER)
        assert peer is not None, "a TCP request is answered only once its credential named the caller"
        return peer

    async def _munge_caller(self, request: web.BaseRequest) -> Peer:
        """The caller a TCP request's MUNGE credential names, once munged vouches for it and its payload is
        this request's digest; anything else is a 401 and nothing is done."""
        body = await _raw_body(request) if request.method == "POST" else b""
        request[_RAW] = body
        credential = request.headers.get(munge.HEADER, "")
        loop = asyncio.get_running_loop()
        try:
            signed = await loop.run_in_executor(None, munge.decode, credential, self.munge_socket)
        except munge.MungeError as error:
            raise _Refusal(HTTPStatus.UNAUTHORIZED, f"MUNGE credential refused: {error}") from None
        if signed.payload != munge.request_digest(request.method, request.path_qs, body):
            raise _Refusal(HTTPStatus.UNAUTHORIZED, "the MUNGE credential was made for another request")
        return Peer(pid=0, uid=signed.uid, gid=signed.gid)

    async def _sign(self, response: web.Response) -> None:
        """The answer's credential: the caller knows it is the advisor's user answering, and this answer."""
        body = response.body if isinstance(response.body, bytes) else b""
        digest = munge.answer_digest(response.status, body)
        loop = asyncio.get_running_loop()
        try:
            response.headers[munge.HEADER] = await loop.run_in_executor(
                None, munge.encode, digest, self.munge_socket
            )
        except munge.MungeError as error:
            log.error("cannot sign an answer: %s", error)

    def _done(self, began: float) -> None:
        self.waiting -= 1
        self.service_s = 0.9 * self.service_s + 0.1 * (time.monotonic() - began)


def _endpoint(path: str) -> str:
    """A bounded label: the callers choose paths, and every distinct label is a time series."""
    if path.startswith("/explain/"):
        return "/explain"
    return path if path in ("/health", "/advise", "/submitted", "/metrics") else "other"


async def _metrics(advisor: AdviceService) -> web.Response:
    """Reading the model figures touches SQLite: off the event loop."""
    body = await asyncio.get_running_loop().run_in_executor(None, advisor.metrics.exposition)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def _metrics_only(advisor: AdviceService, request: web.BaseRequest) -> web.StreamResponse:
    """The TCP listener for Prometheus: the metrics and the health, nothing a caller could be served as."""
    if (request.method, request.path) == ("GET", "/metrics"):
        return await _metrics(advisor)
    if (request.method, request.path) == ("GET", "/health"):
        return _reply(HTTPStatus.OK, advisor.health())
    return _reply(HTTPStatus.NOT_FOUND, ErrorAnswer(error="this listener serves /metrics and /health only"))


class _Refusal(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _budget(request: web.BaseRequest) -> float:
    text = request.headers.get(BUDGET_HEADER, "")
    if not text:
        return DEFAULT_BUDGET_S
    if not text.isdigit() or len(text) > 9:
        raise _Refusal(HTTPStatus.BAD_REQUEST, f"{BUDGET_HEADER} is not a number of milliseconds")
    return min(int(text) / 1000, DEFAULT_BUDGET_S)


async def _raw_body(request: web.BaseRequest) -> bytes:
    if request.content_length is None:
        raise _Refusal(HTTPStatus.LENGTH_REQUIRED, "a request body needs a Content-Length")
    if request.content_length > MAX_BODY:
        raise _Refusal(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request over {MAX_BODY} bytes")
    try:
        return await request.content.readexactly(request.content_length) if request.content_length else b""
    except (asyncio.IncompleteReadError, ConnectionError):
        raise _Refusal(HTTPStatus.BAD_REQUEST, "the request body ended early") from None


async def _body(request: web.BaseRequest, model: type[_M]) -> _M:
    data = request[_RAW] if _RAW in request else await _raw_body(request)
    try:
        return model.model_validate_json(data)
    except ValidationError as error:
        raise _Refusal(HTTPStatus.BAD_REQUEST, f"malformed request: {_fields(error)}") from None


def _fields(error: ValidationError) -> str:
    """Each field's problem in one line, without the echo of the input (which may be megabytes)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or 'body'}: {item['msg']}" for item in error.errors()
    )


def _outcome(work: Callable[[Peer], _B], peer: Peer) -> tuple[HTTPStatus, _B | ErrorAnswer]:
    """The status and body of one request, wherever it runs: a bug costs one request, never the daemon."""
    try:
        return HTTPStatus.OK, work(peer)
    except (ScriptError, RequestError, IntrospectionError) as error:
        return HTTPStatus.UNPROCESSABLE_ENTITY, ErrorAnswer(error=str(error))
    except ValidationError as error:
        return HTTPStatus.UNPROCESSABLE_ENTITY, ErrorAnswer(error=_fields(error))
    except Forbidden as error:
        return HTTPStatus.FORBIDDEN, ErrorAnswer(error=str(error))
    except LookupError as error:
        return HTTPStatus.NOT_FOUND, ErrorAnswer(error=str(error))
    except SlurmError as error:
        log.warning("Slurm failed: %s", error)
        return HTTPStatus.BAD_GATEWAY, ErrorAnswer(error="Slurm did not answer the advisor")
    except Exception as error:
        log.exception("request failed")
        return HTTPStatus.INTERNAL_SERVER_ERROR, ErrorAnswer(error=f"internal error: {type(error).__name__}")


def _reply(status: HTTPStatus, payload: BaseModel) -> web.Response:
    body = payload.model_dump_json().encode()  # bytes, which an answer's MUNGE signature covers
    return web.Response(status=status, body=body, content_type="application/json")


@dataclass(frozen=True)
class Listen:
    """Where the daemon listens besides its Unix socket: the cluster-wide service (callers identified by
    MUNGE, through ``munge_socket``), and the metrics for Prometheus."""

    service: tuple[str, int] | None = None
    munge_socket: Path | None = None
    metrics: tuple[str, int] | None = None


def serve(
    advisor: AdviceService, socket_path: Path, limits: Limits | None = None, listen: Listen | None = None
) -> None:
    """Listens until SIGTERM or SIGINT; the socket is connectable by every user (callers are told apart
    by SO_PEERCRED, not by file permissions)."""
    check_socket_directory(socket_path.parent)
    asyncio.run(_serve(advisor, socket_path, limits or Limits(), listen or Listen()))


async def _serve(advisor: AdviceService, socket_path: Path, limits: Limits, listen: Listen) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def reload() -> None:
        advisor.reload()
        error = advisor.policy.last_error
        log.info("policy reloaded%s", f": {error}" if error else "")

    # Handlers first: a SIGHUP that arrives once the socket exists must reload, not kill.
    loop.add_signal_handler(signal.SIGHUP, reload)
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    if socket_path.exists() or socket_path.is_symlink():
        if not stat.S_ISSOCK(socket_path.lstat().st_mode):
            raise FileExistsError(f"{socket_path} exists and is not a socket")
        socket_path.unlink()
    logging.getLogger("aiohttp.server").addFilter(_CallerFaults())
    routes = _Routes(advisor, limits.workers, listen.munge_socket)
    server = _Server(routes, limits, access_log=None, keepalive_timeout=limits.deadline_s)
    routes.server = server
    # torch, xgboost and pydantic leave a few hundred thousand objects that live as long as the daemon; a full
    # collection walks them all (about 200 ms here), stalling every request in flight. Frozen, they are
    # no longer walked; what requests allocate is collected as usual.
    gc.collect()
    gc.freeze()
    runner = web.ServerRunner(server, handle_signals=False)
    await runner.setup()
    site = web.UnixSite(runner, str(socket_path), backlog=1024)
    await site.start()
    socket_path.chmod(0o666)
    log.info("listening on %s", socket_path)
    if listen.service is not None:
        await web.TCPSite(runner, *listen.service, backlog=1024).start()
        log.info("serving the cluster on %s:%d (callers identified by MUNGE)", *listen.service)
    scrape = None
    if listen.metrics is not None:
        scrape = web.ServerRunner(
            web.Server(lambda request: _metrics_only(advisor, request), access_log=None), handle_signals=False
        )
        await scrape.setup()
        await web.TCPSite(scrape, *listen.metrics).start()
        log.info("metrics on http://%s:%d/metrics", *listen.metrics)
    try:
        await stop.wait()
    finally:
        if scrape is not None:
            await scrape.cleanup()
        await runner.cleanup()
        routes.pool.shutdown(wait=True)
        socket_path.unlink(missing_ok=True)
        log.info("stopped")
