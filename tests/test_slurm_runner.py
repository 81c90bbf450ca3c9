"""LocalRunner and SlurmClient error handling with real subprocesses (no Slurm needed)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import (
    CommandResult,
    LocalRunner,
    SlurmError,
    clean_environment,
)


def fake_executable(directory: Path, name: str, body: str) -> Path:
    """A stand-in command: a tiny script, so tests exercise real processes and pipes."""
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for a reaper (PID 1 in containers may never reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_clean_environment_drops_slurm_variables_and_adds_passed() -> None:
    base = {
        "PATH": "/bin",
        "SBATCH_PARTITION": "x",
        "SQUEUE_FORMAT": "%i",
        "SLURM_CONF": "/etc/old",
        "HOME": "/r",
    }
    assert clean_environment(base, {"SLURM_CONF": "/etc/new"}) == {
        "PATH": "/bin",
        "HOME": "/r",
        "SLURM_CONF": "/etc/new",
    }


def test_subprocess_sees_passed_variables_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SBATCH_PARTITION", "wrong")
    monkeypatch.setenv("SACCT_FORMAT", "wrong")
    result = LocalRunner({"SLURM_CONF": "/tmp/sandbox/slurm.conf"}).run(["env"], timeout=10)
    lines = result.stdout.splitlines()
    assert "SLURM_CONF=/tmp/sandbox/slurm.conf" in lines
    assert not [line for line in lines if line.startswith(("SBATCH_", "SACCT_"))]
    assert result.returncode == 0


def test_stdin_is_delivered_and_closed() -> None:
    script = "#!/bin/sh\n#SBATCH --gres=gpu:1\necho héllo\n" * 2000
    result = LocalRunner().run(["cat"], stdin=script, timeout=10)
    assert result == CommandResult(("cat",), 0, script, "")


def test_nonzero_exit_is_a_result_not_an_error() -> None:
    result = LocalRunner().run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=10)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    hang = fake_executable(tmp_path, "hang", f"sleep 60 & echo $! > {pids}; echo $$ >> {pids}; wait")
    started = time.monotonic()
    with pytest.raises(SlurmError, match=r"timed out after 0.5 s \(did not complete\)") as caught:
        LocalRunner().run([str(hang)], timeout=0.5)
    assert time.monotonic() - started < 5
    assert caught.value.returncode is None
    deadline = time.monotonic() + 5
    while any(alive(int(pid)) for pid in pids.read_text().split()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(int(pid)) for pid in pids.read_text().split())


def test_plain_sleep_times_out_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(SlurmError, match="sleep 60: timed out"):
        LocalRunner().run(["sleep", "60"], timeout=0.5)
    assert time.monotonic() - started < 5


def test_missing_executable(tmp_path: Path) -> None:
    with pytest.raises(SlurmError, match="executable not found") as caught:
        LocalRunner().run([str(tmp_path / "no-such-sbatch"), "--version"], timeout=5)
    assert caught.value.returncode is None
    assert caught.value.argv == (str(tmp_path / "no-such-sbatch"), "--version")


def test_non_utf8_output_does_not_crash(tmp_path: Path) -> None:
    noisy = fake_executable(tmp_path, "noisy", r"printf '\377\376 garbage\n'; printf '\377\n' >&2")
    result = LocalRunner().run([str(noisy)], timeout=10)
    assert result.stdout == "\ufffd\ufffd garbage\n"
    assert result.stderr == "\ufffd\n"


def client_with(tmp_path: Path, name: str, body: str, **env: str) -> SlurmClient:
    """A client whose PATH resolves ``name`` to a fake command, so the real argv flows end to end."""
    fake_executable(tmp_path, name, body)
    return SlurmClient(LocalRunner({"PATH": f"{tmp_path}:/usr/bin:/bin", **env}), timeout_s=10)


def test_client_turns_unparseable_output_into_slurm_error(tmp_path: Path) -> None:
    client = client_with(tmp_path, "sinfo", r"printf '\377\376 garbage'")
    with pytest.raises(
        SlurmError, match="sinfo --json: unexpected output: sinfo output is not JSON"
    ) as caught:
        client.nodes()
    assert caught.value.stdout == "\ufffd\ufffd garbage"
    assert caught.value.returncode == 0


def test_client_reports_slurm_error_lines(tmp_path: Path) -> None:
    client = client_with(
        tmp_path,
        "sbatch",
        "cat > /dev/null\n"
        "echo 'sbatch: error: invalid partition specified: nope' >&2\n"
        "echo 'sbatch: error: Batch job submission failed: Invalid partition name specified' >&2\n"
        "exit 1",
    )
    with pytest.raises(SlurmError) as caught:
        client.submit("#!/bin/sh\ntrue\n", ["--partition=nope"])
    error = caught.value
    assert (error.argv, error.returncode) == (("sbatch", "--partition=nope"), 1)
    assert error.reason == "Batch job submission failed: Invalid partition name specified"
    assert str(error) == (
        "sbatch --partition=nope: Batch job submission failed: Invalid partition name specified "
        "(exit code 1); stderr: sbatch: error: invalid partition specified: nope | "
        "sbatch: error: Batch job submission failed: Invalid partition name specified"
    )


def test_client_submit_sends_script_on_stdin(tmp_path: Path) -> None:
    received = tmp_path / "received"
    client = client_with(tmp_path, "sbatch", f'cat > {received}; echo "$@" >> {received}; echo "7;sandbox"')
    result = client.submit("#!/bin/sh\necho hi\n", ["--job-name=a b", "--time=5"], parsable=True)
    assert (result.job_id, result.cluster) == (7, "sandbox")
    assert received.read_text() == "#!/bin/sh\necho hi\n--parsable --job-name=a b --time=5\n"
    with pytest.raises(ValueError, match="exactly one"):
        client.submit("x", [], script_path="/tmp/job.sh")


def test_client_test_only_reads_stderr_in_utc(tmp_path: Path) -> None:
    client = client_with(
        tmp_path,
        "sbatch",
        'cat > /dev/null; echo "sbatch: Job 4 to start at $(date -d @1796029486 +%Y-%m-%dT%H:%M:%S) '
        'using 1 processors on nodes v100-1 in partition v100" >&2',
        TZ="XYZ-05:30",  # the zone the login node happens to be in; the client must override it
    )
    result = client.test_only("#!/bin/sh\n", ["--partition=v100"])
    assert (result.job_id, result.start_time.timestamp(), result.partition) == (4, 1796029486, "v100")


def test_client_show_job_without_records(tmp_path: Path) -> None:
    client = client_with(tmp_path, "scontrol", "echo 'No jobs in the system'")
    with pytest.raises(SlurmError, match="no such job"):
        client.show_job(5)
