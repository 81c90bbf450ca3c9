"""Who may use the pages (issue 46): `advisor web` is a personal server, the Open OnDemand app serves its
own user, and a form runs a factory only when posted from the page itself.

The attack each test replays: a script whose ``#ADVISOR --model=os:system --model-arg=command=...`` is
"introspected" by the page, which runs the command as the server's user. A marker file says whether it ran.
"""

from __future__ import annotations

import html
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.web.cli import unix_listener
from advisor.web.guard import host_refusal, origin_of

from .web_support import Client, ood, serving

REPO = Path(__file__).resolve().parent.parent


def _attack(marker: Path) -> str:
    """A batch script whose "factory" is a shell command that leaves ``marker``."""
    return (
        "#!/bin/sh\n#SBATCH --time=1:00:00\n"
        f"#ADVISOR --model=os:system --model-arg=command=id>{marker} --global-batch=8 --steps=10\n"
    )


def _never(method: str, path: str, body: bytes | None) -> bytes:
    raise ConnectionRefusedError("no daemon here: a refused request never reaches one")


_STRANGER = """
import http.client, json, sys, urllib.parse
port, script = int(sys.argv[1]), sys.argv[2]
seen = {}
for method, path, body in [("POST", "/", urllib.parse.urlencode({"script": script})),
                           ("GET", "/jobs", None), ("GET", "/admin", None), ("GET", "/?token=guess", None)]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": f"http://127.0.0.1:{port}"}
    connection.request(method, path, body, headers)
    answer = connection.getresponse()
    seen[method + " " + path] = [answer.status, answer.read().decode()]
print(json.dumps(seen))
"""


def test_another_local_user_without_the_token_is_refused_and_no_factory_runs(tmp_path: Path) -> None:
    """The issue's probe: the server runs as root here (started in this process), the request comes from
    ``nobody``, who can reach the port but was never shown the printed address."""
    marker = tmp_path / "ran-as-the-server"
    with serving(_never) as served:
        probe = subprocess.run(
            ["/usr/bin/python3", "-I", "-c", _STRANGER, str(served.port), _attack(marker)],
            user="nobody",
            capture_output=True,
            text=True,
            timeout=200,
            check=False,
        )
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    assert {request: status for request, (status, _) in seen.items()} == dict.fromkeys(seen, 401)
    assert all("open the address it printed when it started" in page for _, page in seen.values())
    assert not marker.exists(), "the factory ran as the server's user for a request without the token"


def test_the_printed_address_signs_the_browser_in_and_its_form_runs_the_users_own_factory(
    tmp_path: Path,
) -> None:
    """The legitimate flow: the token becomes a cookie no script can read and no other site's request
    carries, leaves the address, and the page's form (with its CSRF token) runs the user's factory."""
    marker = tmp_path / "ran"
    with serving(_never) as served:
        client = Client(served)
        status, headers, _ = client.request("GET", f"/?token={served.token}&x=1")
        assert status == 303 and headers["location"] == "/?x=1", "the token leaves the address bar"
        cookie = headers["set-cookie"]
        assert f"advisor-token-{served.port}={served.token}" in cookie
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        status, headers, page = client.request("GET", "/")
        assert status == 200 and "frame-ancestors 'none'" in headers["content-security-policy"]
        assert page.count(f'name="csrf" value="{client.csrf}"') == 2 and len(client.csrf) == 64
        status, page = client.post({"script": _attack(marker)})
        by_header = Client(served).request("GET", "/jobs", headers={"Authorization": f"token {served.token}"})
        wrong = Client(served).request("GET", "/jobs", headers={"Authorization": "token not-it"})
    assert marker.read_text().startswith("uid=0(root)"), "the user's own factory ran, as the user"
    assert status == 422 and "os:system could not be introspected" in page
    assert by_header[0] == 503 and "no daemon here" in by_header[2] and wrong[0] == 401


@pytest.mark.parametrize(
    ("headers", "fields", "message"),
    [
        ({"Origin": "http://evil.example"}, {}, "not http://evil.example"),
        ({"Origin": "http://127.0.0.1:1"}, {}, "not http://127.0.0.1:1"),  # another server on this host
        ({"Origin": "null"}, {}, "not null"),
        ({"Origin": "", "Referer": "http://evil.example/page"}, {}, "not http://evil.example/page"),
        ({"Origin": ""}, {}, "not no Origin or Referer"),
        ({}, {"csrf": ""}, "reload the page and send the form again"),
        ({}, {"csrf": "0" * 64}, "reload the page and send the form again"),
    ],
)
def test_a_form_from_another_origin_or_without_the_pages_csrf_token_is_refused(
    headers: dict[str, str], fields: dict[str, str], message: str, tmp_path: Path
) -> None:
    """The browser holds the cookie, so a page elsewhere that posts to this one sends it too: only the
    Origin (else Referer) and the CSRF token tell the page's own form from that one."""
    marker = tmp_path / "ran"
    with serving(_never) as served:
        client = Client(served).sign_in()
        status, page = client.post({"script": _attack(marker), **fields}, headers=headers)
        referred, _ = client.post({"script": "#!/bin/sh\n"}, headers={"Origin": "", "Referer": served.url})
    assert status == 403 and message in page
    assert not marker.exists()
    assert referred == 503, "the page's own form, sent without Origin, is known by its Referer"


def test_a_request_to_another_host_name_is_refused_even_with_the_cookie(tmp_path: Path) -> None:
    """DNS rebinding: a page on evil.example, whose name now points here, reaches the port; its Host says
    evil.example."""
    marker = tmp_path / "ran"
    with serving(_never) as served:
        client = Client(served).sign_in()
        shown, _ = client.get("/jobs")
        rebound = {"Host": f"evil.example:{served.port}", "Origin": f"http://evil.example:{served.port}"}
        status, _, page = client.request("GET", "/jobs", headers=rebound)
        posted, _ = client.post({"script": _attack(marker)}, headers=rebound)
        named, _, _ = client.request("GET", "/jobs", headers={"Host": f"localhost:{served.port}"})
    assert shown == 503 and named == 503, "its own names are answered"
    assert status == 403 and f"this server answers only as 127.0.0.1:{served.port}, not as evil" in page
    assert posted == 403 and not marker.exists()


def test_advisor_web_does_not_start_as_root_nor_listen_beyond_this_host() -> None:
    """This suite runs as root: the real command, which would otherwise serve (and block)."""
    advisor = str(Path(sys.executable).with_name("advisor"))
    for words, status, said in [
        (["--port", "0"], 1, "advisor web does not run as root"),
        (["--host", "0.0.0.0"], 2, "--host 0.0.0.0 is not a loopback address"),  # noqa: S104 (refused)
    ]:
        started = subprocess.Popen([advisor, "web", *words], stderr=subprocess.PIPE, text=True)
        try:
            _, stderr = started.communicate(timeout=60)
        finally:
            if started.poll() is None:
                started.kill()
                started.wait()
        assert started.returncode == status and said in stderr, (words, started.returncode, stderr)


def test_only_the_servers_own_loopback_names_and_origins_are_its_own() -> None:
    assert host_refusal("127.0.0.1:8765", "127.0.0.1", 8765) is None
    assert host_refusal("LOCALHOST:8765", "127.0.0.1", 8765) is None
    assert host_refusal("[::1]:8765", "::1", 8765) is None
    assert host_refusal("localhost:4000", "localhost", None) is None, "a Unix socket: any tunnelled port"
    for host in ("127.0.0.1:8766", "127.0.0.1", "127.0.0.1:8765@evil.example", "evil.example:8765", ""):
        assert host_refusal(host, "127.0.0.1", 8765) is not None, host
    assert origin_of("HTTPS://OnDemand.Example:443/pun/sys/advisor/") == "https://ondemand.example"
    assert origin_of("http://[::1]:8765") == "http://[::1]:8765"
    assert origin_of("null") is None and origin_of("file:///x") is None


def test_under_open_ondemand_only_the_apps_own_user_may_post_from_the_apps_own_page(tmp_path: Path) -> None:
    """OnDemand's proxy names the user it logged in; the app (alice's) serves alice only, and a form only
    with its page's CSRF token, from the origin the browser used."""
    marker = tmp_path / "ran"
    form = {"script": _attack(marker)}
    evil = {
        "HTTP_X_FORWARDED_HOST": "evil.example, ondemand.example"
    }  # the proxy appends the host it was sent
    refused = {
        "another user": ood("/", "POST", form, {"HTTP_X_FORWARDED_USER": "mallory"}),
        "another REMOTE_USER": ood("/", "POST", form, {"REMOTE_USER": "mallory"}),
        "no user": ood("/jobs", headers={"HTTP_X_FORWARDED_USER": ""}),
        "no CSRF token": ood("/", "POST", {**form, "csrf": ""}),
        "another session's": ood("/", "POST", form, {"HTTP_COOKIE": "advisor-session=" + "x" * 43}),
        "another origin": ood("/", "POST", form, {"HTTP_ORIGIN": "https://evil.example"}),
        "plain http": ood("/", "POST", form, {"HTTP_ORIGIN": "http://ondemand.example"}),
        "a host forwarded before the proxy's": ood(
            "/", "POST", form, {**evil, "HTTP_ORIGIN": "https://evil.example"}
        ),
    }
    statuses = {why: status[:3] for why, (status, _, _) in refused.items()}
    assert statuses == {**dict.fromkeys(refused, "403"), "no user": "401"}
    assert "this app runs as alice, for alice only, not for mallory" in refused["another user"][2]
    assert "a form is taken only from the advisor's own page (https://ondemand.example)" in html.unescape(
        refused["another origin"][2]
    )
    assert not marker.exists()
    status, headers, page = ood("/", "POST", form, {"REMOTE_USER": "alice"})
    assert status.startswith("422") and "os:system could not be introspected" in page
    assert marker.exists(), "alice's own form runs alice's factory"
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]


def test_under_open_ondemand_the_session_cookie_is_the_apps_alone() -> None:
    _, headers, _ = ood("/")
    cookie = headers["Set-Cookie"]
    assert cookie.startswith("advisor-session=") and "Path=/pun/sys/advisor/" in cookie
    assert all(word in cookie for word in ("HttpOnly", "SameSite=Strict", "Secure"))


def test_on_a_unix_socket_only_its_user_may_connect(tmp_path: Path) -> None:
    """`advisor web --socket`: no permission for anyone else from the moment it is bound, whatever the
    umask (the request checks are the loopback server's, any tunnelled port being its own)."""
    before = os.umask(0)
    try:
        listening = unix_listener(tmp_path / "web.sock")
    finally:
        os.umask(before)
    listening.close()
    assert stat.S_IMODE((tmp_path / "web.sock").stat().st_mode) == 0o600
