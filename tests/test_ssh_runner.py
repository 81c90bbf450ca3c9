"""SshRunner against a real sshd on loopback: big outputs, stdin, odd bytes, argv quoting, timeouts."""

from __future__ import annotations

import getpass
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from advisor.slurm.runner import LocalRunner, SlurmError, SshRunner

from .conftest import SshEndpoint


@pytest.fixture
def ssh(sshd: SshEndpoint) -> Iterator[SshRunner]:
    runner = SshRunner(
        host="127.0.0.1",
        port=sshd.port,
        user=getpass.getuser(),
        key_filename=str(sshd.key),
        env={"ADVISOR_PROBE": "a value with spaces"},
        known_hosts=str(sshd.known_hosts),
    )
    yield runner
    runner.close()


def test_a_large_output_arrives_whole(ssh: SshRunner) -> None:
    argv = ["sh", "-c", "seq 1 400000; echo done >&2"]
    remote = ssh.run(argv, timeout=60)
    local = LocalRunner().run(argv, timeout=60)
    assert remote.returncode == 0
    assert len(remote.stdout) == len(local.stdout) > 2_000_000
    assert remote.stdout == local.stdout
    assert remote.stderr == "done\n"


def test_threads_that_start_at_once_share_one_connection(ssh: SshRunner) -> None:
    """The daemon's first request and its start-up jobs reach a fresh runner together."""
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda n: ssh.run(["echo", str(n)], timeout=30), range(12)))
    assert [r.stdout for r in results] == [f"{n}\n" for n in range(12)]


def test_stdin_reaches_the_remote_command_and_ends(ssh: SshRunner) -> None:
    text = "#!/bin/sh\n" + "echo line\n" * 20000
    result = ssh.run(["wc", "-c"], stdin=text, timeout=30)
    assert result.stdout.strip() == str(len(text))


def test_arguments_and_environment_arrive_unchanged(ssh: SshRunner) -> None:
    tricky = ["it's", '"quoted"', "$(reboot)", "a;b", "x\ny", "*"]
    result = ssh.run(
        ["python3", "-c", "import os,sys; print(sys.argv[1:], os.environ['ADVISOR_PROBE'])", *tricky],
        timeout=30,
    )
    assert result.stdout.strip() == f"{tricky} a value with spaces"


def test_non_utf8_output_does_not_break_the_runner(ssh: SshRunner) -> None:
    result = ssh.run(["printf", "ok \\377\\376 end"], timeout=30)
    assert result.stdout == "ok \ufffd\ufffd end"


def test_a_hanging_command_times_out(ssh: SshRunner) -> None:
    started = time.monotonic()
    with pytest.raises(SlurmError, match="timed out") as caught:
        ssh.run(["sleep", "30"], timeout=1)
    assert caught.value.returncode is None
    assert time.monotonic() - started < 10
    assert ssh.run(["true"], timeout=30).returncode == 0, "the connection is usable afterwards"


def test_an_unknown_host_key_is_refused(sshd: SshEndpoint, tmp_path: pytest.TempPathFactory) -> None:
    empty = tmp_path / "known_hosts"  # type: ignore[operator]
    empty.write_text("")
    runner = SshRunner(
        host="127.0.0.1",
        port=sshd.port,
        user=getpass.getuser(),
        key_filename=str(sshd.key),
        env={},
        known_hosts=str(empty),
    )
    with pytest.raises(SlurmError):
        runner.run(["true"], timeout=10)
