"""MUNGE credentials for the cluster-wide service: who is calling over TCP, as the kernel says over a socket.

Every Slurm host runs munged with the cluster's key. A caller encodes a credential whose payload is the
digest of its request (method, path, body): munged stamps it with the caller's uid and gid, which no
request can claim, and with a lifetime; the service decodes it, and munged refuses one that is forged,
expired, or seen before (replayed). The payload binds it to this one request, so a credential cannot be
lifted onto another body. The service signs its answers the same way, for the caller's uid alone and
with the digest of the request they answer, and the caller accepts an answer only from root or the
advisor's user, as it accepts a socket only from them, and only for its own request.

Standard library only (`munge` and `unmunge` are MUNGE's own commands): advise-submit imports this.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

HEADER = "Advisor-Munge"
"""The request's (or the answer's) credential."""
TIMEOUT_S = 5.0


class MungeError(RuntimeError):
    """No credential could be made or accepted; the message is munge's own, or says what did not match."""


@dataclass(frozen=True)
class Credential:
    """What a decoded credential vouches for."""

    uid: int
    gid: int
    payload: str


def request_digest(method: str, path: str, body: bytes | bytearray) -> str:
    digest = hashlib.sha256(f"request {method} {path}\n".encode())
    digest.update(body)
    return digest.hexdigest()


def answer_payload(status: int, body: bytes, request: str, uid: int) -> str:
    """What the service signs on an answer: the answer itself, the digest of the request it answers and
    the uid it was served for. A relay that sent a request of its own cannot pass the answer off as the
    one to the caller's request."""
    answer = hashlib.sha256(f"answer {status}\n".encode() + body).hexdigest()
    return f"{answer} request={request} uid={uid}"


def encode(
    payload: str, socket: Path | None, ttl_s: int | None = None, restrict_uid: int | None = None
) -> str:
    """A credential of this process's uid and gid carrying ``payload``; with ``restrict_uid``, one only
    that uid can decode."""
    argv = ["munge", *_socket(socket), *([f"--ttl={ttl_s}"] if ttl_s is not None else [])]
    argv += [f"--restrict-uid={restrict_uid}"] if restrict_uid is not None else []
    result = _run([*argv, "--string", payload])
    return result.stdout.strip()


def decode(credential: str, socket: Path | None) -> Credential:
    """The uid, gid and payload munged vouches for; `MungeError` for a credential it refuses."""
    if not credential or len(credential) > 4096 or not credential.isascii():
        raise MungeError("no credential, or not one munge could have written")
    result = _run(["unmunge", *_socket(socket), "--numeric", "--keys=STATUS,UID,GID"], stdin=credential)
    metadata, _, payload = result.stdout.partition("\n\n")
    fields = {
        key.strip(): value.strip()
        for key, _, value in (line.partition(":") for line in metadata.splitlines())
    }
    try:
        return Credential(uid=int(fields["UID"]), gid=int(fields["GID"]), payload=payload.strip())
    except (KeyError, ValueError):
        raise MungeError(f"unmunge said nothing of the caller: {metadata[:200]!r}") from None


def _socket(socket: Path | None) -> list[str]:
    return [f"--socket={socket}"] if socket is not None else []


def _run(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise MungeError(f"{argv[0]} could not run: {error}") from None
    if result.returncode != 0:
        words = result.stderr.strip().removeprefix(f"{argv[0]}: ").removeprefix("Error: ")
        raise MungeError(
            words or _STATUS.get(result.returncode, f"{argv[0]} exited with {result.returncode}")
        )
    return result


_STATUS = {
    6: "munged's socket could not be reached",
    7: "munged did not answer in time",
    11: "the credential is invalid",
    12: "the credential is invalid",
    13: "the credential is unauthorized",
    14: "the credential is malformed",
    15: "the credential is expired",
    16: "the credential is rewound (made in the future)",
    17: "the credential is replayed",
    18: "the credential is unauthorized",
}
"""MUNGE's exit statuses (munge_err_t) where unmunge says no more than the status on stdout."""
