"""The daemon as the pages ask it: the socket (or the cluster's service) the settings name, as this user."""

from __future__ import annotations

from advisor.daemon.transport import Service, call
from advisor.settings import CallerSettings
from advisor.settings.validated import Settings
from advisor.submit_ask import trusted_uids
from advisor.web.pages import Ask


def daemon_ask(given: Settings) -> Ask:
    """An `Ask` that trusts only a daemon served by root or the advisor's user, as advise-submit does."""
    settings = CallerSettings(
        given.socket, given.timeout_s, given.daemon_user, given.service, given.munge_socket
    )
    service = Service(settings.socket, settings.service, settings.munge_socket)
    trusted = trusted_uids(settings)

    def ask(method: str, path: str, body: bytes | None) -> bytes:
        return call(service, method, path, body, settings.timeout_s, trusted)

    return ask
