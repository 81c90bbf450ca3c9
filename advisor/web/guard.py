"""Who may use the pages, apart from any web server: the token, the form's CSRF token, the Host and the
Origin, checked the same way by `advisor web` (`advisor.web.app`) and the Open OnDemand app
(`advisor.web.wsgi`).

A page runs code: the compare form introspects the factory a script names (the user's own code) as the
user the server runs as. So `advisor web` is a personal server, as Jupyter's is: loopback only, a secret
token per start, and every form carries a token derived from it and comes from the page's own origin.
Pure: headers and fields in, a `Refusal` (or None) out; secrets compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

CSRF_FIELD = "csrf"
"""The hidden field every form posts."""
SECURITY_HEADERS = (
    ("Content-Security-Policy", "frame-ancestors 'none'"),  # no other page frames the forms (clickjacking)
    ("Referrer-Policy", "same-origin"),  # the page's own posts keep their Referer; no other site sees it
    ("Cache-Control", "no-store"),  # a page shows the user's jobs and scripts
)
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST = re.compile(r"^[A-Za-z0-9.:\[\]-]{1,300}$")
"""What a Host header may hold: a name or address and a port, nothing that a URL would read otherwise."""


@dataclass(frozen=True)
class Refusal:
    """A request refused, and the sentence that says why and what to do (the page shows it)."""

    status: int
    message: str


NO_TOKEN = Refusal(
    401,
    "This page is private to the user who started advisor web: open the address it printed when it started "
    "(it ends in ?token=...). A restart prints a new one.",
)


def new_token() -> str:
    """A fresh secret for one start of the server (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def same(given: str | None, expected: str) -> bool:
    """A secret as given against the real one, in constant time (no timing says how much of it matched)."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def csrf_token(key: str) -> str:
    """The token a page's forms carry: derived from a secret the browser's requests hold (the server's
    token, or the app's session cookie), so another site can neither read it nor make it."""
    return hmac.new(key.encode(), b"advisor web form", hashlib.sha256).hexdigest()


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: token ...`` (or ``Bearer ...``) header."""
    scheme, _, value = (authorization or "").strip().partition(" ")
    return value.strip() or None if scheme.lower() in ("token", "bearer") else None


def is_loopback(host: str) -> bool:
    """An address (or ``localhost``) that only this host can reach."""
    if host.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_host(host: str) -> str:
    """An address as a URL's host: an IPv6 one in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def host_refusal(host: str | None, bound: str, port: int | None) -> Refusal | None:
    """A loopback server answers only to its own names (a page on another name that resolves here, DNS
    rebinding, is refused); ``port`` None: a Unix socket, reached by a tunnel from any local port."""
    given = host or ""
    if _HOST.match(given):
        parts = urlsplit("//" + given)
        try:
            name, given_port = url_host(parts.hostname or ""), parts.port
        except ValueError:  # a port that is not a number
            name, given_port = "", None
        if name in _LOOPBACK_NAMES | {url_host(bound).lower()} and port in (None, given_port):
            return None
    where = f"{url_host(bound)}:{port}" if port is not None else "localhost"
    return Refusal(403, f"this server answers only as {where}, not as {given[:100] or 'no Host'}")


def origin_of(url: str | None) -> str | None:
    """``scheme://host[:port]`` of an Origin or a Referer, lower case, the scheme's default port dropped."""
    if not url or url == "null":
        return None
    parts = urlsplit(url.strip())
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    base = f"{parts.scheme}://{url_host(parts.hostname)}"  # urlsplit's hostname is lower case already
    return base if port in (None, _DEFAULT_PORTS[parts.scheme]) else f"{base}:{port}"


def form_refusal(
    fields: Mapping[str, str], key: str, origin: str | None, referer: str | None, own: str
) -> Refusal | None:
    """A posted form is taken only from the page's own origin (Origin, else Referer) and only with the
    CSRF token its page carried; ``own`` is the page's origin as the browser sees it."""
    sent = origin_of(origin) if origin is not None else origin_of(referer)
    if sent is None or sent != origin_of(own):
        said = (origin or referer or "no Origin or Referer")[:100]
        return Refusal(
            403, f"a form is taken only from the advisor's own page ({origin_of(own)}), not {said}"
        )
    if not same(fields.get(CSRF_FIELD), csrf_token(key)):
        return Refusal(
            403,
            "this form does not carry its page's token (it was sent from elsewhere, or from before a "
            "restart): reload the page and send the form again",
        )
    return None


def user_refusal(claimed: list[str], own: str) -> Refusal | None:
    """Open OnDemand's app serves the user its process runs as: every name the proxy says authenticated
    (``REMOTE_USER``, OnDemand's ``X-Forwarded-User``) must be that user."""
    if not claimed:
        return Refusal(
            401, "no authenticated user: the advisor's app is served by Open OnDemand, which logs you in"
        )
    others = [name for name in claimed if name != own]
    if others:
        return Refusal(403, f"this app runs as {own}, for {own} only, not for {others[0][:100]}")
    return None


@dataclass(frozen=True)
class Door:
    """What one start of `advisor web` lets in: requests that carry its token, sent to its own address."""

    token: str
    bound: str
    """The loopback address it listens on (``localhost`` for a Unix socket)."""
    port: int | None
    """None: a Unix socket, reached through a tunnel from a port of the user's choosing."""

    @property
    def cookie(self) -> str:
        """The cookie that keeps the token: browsers keep cookies per host, not per port, so two servers
        on one host each have their own."""
        return "advisor-token" if self.port is None else f"advisor-token-{self.port}"

    def admits(self, authorization: str | None, cookie: str | None) -> bool:
        return same(bearer(authorization), self.token) or same(cookie, self.token)
