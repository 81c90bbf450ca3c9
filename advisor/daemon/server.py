"""The daemon's HTTP server on a Unix socket: aiohttp's low-level server, routing, limits and a clean stop.

aiohttp parses every request strictly (a negative or non-numeric Content-Length, a header over 8 KiB or
a broken request line is a 400 before any code of ours runs) and serves every connection from one event
loop, so an idle connection costs a file descriptor, not a thread. On top of it: a cap on connections in
all and per caller in a pool for the socket and one for TCP (`advisor.daemon.accounting`), a deadline by
which each connection must have been answered, a body cap and a memory budget for bodies, and a bounded
thread pool for the advice itself; a request that cannot be
answered within the caller's budget (`BUDGET_HEADER`) is told so at once (503) instead of queueing past it.
SIGHUP reloads the policy (off the event loop), SIGTERM and SIGINT stop the server after current requests.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import signal
import stat
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from http import HTTPStatus
from pathlib import Path
from typing import TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from pydantic import BaseModel, ValidationError

from advisor.api import AdviseRequest, ErrorAnswer, Submitted
from advisor.daemon import munge
from advisor.daemon.accounting import BodyBudget, BodyEnded, Connection, CountingServer, read_body
from advisor.daemon.app import AdviceService
from advisor.daemon.limits import Limits
from advisor.daemon.links import Forbidden
from advisor.daemon.metrics import CONTENT_TYPE
from advisor.daemon.reload import PolicyReload
from advisor.daemon.transport import BUDGET_HEADER, Peer, check_socket_directory
from advisor.introspect.errors import IntrospectionError
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import MAX_SCRIPT_BYTES
from advisor.slurm.runner import SlurmError

log = logging.getLogger("advisor.daemon")
_M = TypeVar("_M", bound=BaseModel)
_B = TypeVar("_B", bound=BaseModel | None)
MAX_BODY = 2 * MAX_SCRIPT_BYTES
DEFAULT_BUDGET_S = 10.0
_PEER, _SIGNED, _RAW, _HELD = "advisor.peer", "advisor.signed", "advisor.body", "advisor.held"
"""A TCP request's caller and the credential that named it (its answer is signed for them); the body,
once read; the caller's uid and the bytes of the body budget reserved for it."""
_EXPLAIN = re.compile(r"/explain/([0-9]{1,10})")
"""Slurm's job ids are 32-bit: a longer number is no job of anyone's."""


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

    def __init__(self, advisor: AdviceService, limits: Limits, munge_socket: Path | None = None) -> None:
        self.advisor = advisor
        workers = limits.workers
        self.workers = workers
        self.munge_socket = munge_socket
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="advise")
        self.budget = BodyBudget(limits.body_memory_mib * 2**20, limits.body_memory_per_caller_mib * 2**20)
        self.server: CountingServer | None = None
        self.waiting = 0
        """Advice computations queued or running on the pool."""
        self.service_s = 0.05
        """A running mean of how long one takes, for the wait a new request would have."""

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        began, endpoint = time.monotonic(), _endpoint(request.path)
        try:
            if self._connection(request).peer is None and (
                endpoint not in ("/health", "/metrics") or munge.HEADER in request.headers
            ):
                await self._munge_caller(request)
            response = await self._route(request)
        except _Refusal as refusal:
            response = _reply(refusal.status, ErrorAnswer(error=refusal.message))
        finally:
            # Emptied, not only dropped: a traceback may keep a frame that names it.
            request.pop(_RAW, bytearray()).clear()
            if _HELD in request:
                self.budget.release(*request[_HELD])
        signed = request.get(_SIGNED)
        if signed is not None and isinstance(response, web.Response):
            await self._sign(response, signed)
        metrics = self.advisor.metrics
        metrics.requests.labels(endpoint, str(response.status)).inc()
        metrics.latency.labels(endpoint).observe(time.monotonic() - began)
        if response.status == HTTPStatus.UNAUTHORIZED:
            metrics.unauthenticated.inc()
        elif endpoint == "/advise" and response.status != HTTPStatus.OK:
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
            advise = await self._body(request, AdviseRequest)
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
            submitted = await self._body(request, Submitted)
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

    def _connection(self, request: web.BaseRequest) -> Connection:
        assert self.server is not None
        return self.server.accounted[request.protocol]

    def _peer(self, request: web.BaseRequest) -> Peer:
        peer = self._connection(request).peer or request.get(_PEER)
        assert peer is not None, "a TCP request is answered only once its credential named the caller"
        return peer

    async def _munge_caller(self, request: web.BaseRequest) -> None:
        """What a TCP request's MUNGE credential vouches for (kept in the request), decoded before a byte
        of the body is read; once munged vouches for it, the body is read as its caller's and must be
        what the credential signs. Anything else is a 401, unsigned, and nothing is done."""
        credential = request.headers.get(munge.HEADER, "")
        loop = asyncio.get_running_loop()
        try:
            signed = await loop.run_in_executor(None, munge.decode, credential, self.munge_socket)
        except munge.MungeError as error:
            raise _Refusal(HTTPStatus.UNAUTHORIZED, f"MUNGE credential refused: {error}") from None
        request[_PEER], request[_SIGNED] = Peer(pid=0, uid=signed.uid, gid=signed.gid), signed
        assert self.server is not None
        self.server.authenticated(request.protocol)
        body = await self._raw_body(request) if request.method == "POST" else b""
        if signed.payload != munge.request_digest(request.method, request.path_qs, body):
            del request[_SIGNED]
            raise _Refusal(HTTPStatus.UNAUTHORIZED, "the MUNGE credential was made for another request")

    async def _sign(self, response: web.Response, signed: munge.Credential) -> None:
        """The answer's credential, for the caller alone: it knows the advisor's user answered, this answer,
        to its own request."""
        body = response.body if isinstance(response.body, bytes) else b""
        payload = munge.answer_payload(response.status, body, signed.payload, signed.uid)
        loop = asyncio.get_running_loop()
        try:
            response.headers[munge.HEADER] = await loop.run_in_executor(
                None, partial(munge.encode, payload, self.munge_socket, restrict_uid=signed.uid)
            )
        except munge.MungeError as error:
            log.error("cannot sign an answer: %s", error)

    async def _raw_body(self, request: web.BaseRequest) -> bytearray:
        """The body, read only within its caller's share of the body budget, reserved up front from its
        declared length; the reservation is given back when the request ends (`__call__`)."""
        if _RAW in request:
            raw: bytearray = request[_RAW]
            return raw
        length = request.content_length
        if length is None:
            raise _Refusal(HTTPStatus.LENGTH_REQUIRED, "a request body needs a Content-Length")
        if length > MAX_BODY:
            raise _Refusal(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request over {MAX_BODY} bytes")
        uid = self._peer(request).uid
        refused = self.budget.reserve(uid, length)
        if refused is not None:
            raise _Refusal(HTTPStatus.SERVICE_UNAVAILABLE, f"the advisor is busy: {refused}")
        request[_HELD] = (uid, length)
        try:
            request[_RAW] = await read_body(request.content, length)
        except (BodyEnded, ConnectionError):
            raise _Refusal(HTTPStatus.BAD_REQUEST, "the request body ended early") from None
        return request[_RAW]  # type: ignore[no-any-return]

    async def _body(self, request: web.BaseRequest, model: type[_M]) -> _M:
        data = await self._raw_body(request)
        try:
            return model.model_validate_json(data)
        except ValidationError as error:
            raise _Refusal(HTTPStatus.BAD_REQUEST, f"malformed request: {_fields(error)}") from None

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


def _fields(error: ValidationError) -> str:
    """Each field's problem in one line, without the echo of the input (which may be megabytes)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or 'body'}: {item['msg']}" for item in error.errors()
    )


def _outcome(work: Callable[[Peer], _B], peer: Peer) -> tuple[HTTPStatus, _B | ErrorAnswer]:
    """The status and body of one request, wherever it runs: a bug costs one request, never the daemon."""
    try:
        return HTTPStatus.OK, work(peer)
    except (ScriptError, IntrospectionError) as error:
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

    reloading = PolicyReload(advisor.policy, loop)
    # Handlers first: a SIGHUP that arrives once the socket exists must reload, not kill.
    loop.add_signal_handler(signal.SIGHUP, reloading.start)
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    if socket_path.exists() or socket_path.is_symlink():
        if not stat.S_ISSOCK(socket_path.lstat().st_mode):
            raise FileExistsError(f"{socket_path} exists and is not a socket")
        socket_path.unlink()
    logging.getLogger("aiohttp.server").addFilter(_CallerFaults())
    routes = _Routes(advisor, limits, listen.munge_socket)
    server = CountingServer(routes, limits, access_log=None, keepalive_timeout=limits.deadline_s)
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
