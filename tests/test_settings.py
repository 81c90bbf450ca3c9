"""Settings: file, variables and options, in that order; every problem names its line or its variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from advisor import cli
from advisor.settings import CallerSettings, SettingsError, caller_settings, load_settings
from advisor.settings.validated import BenchSettings, ModelSettings, Settings, SlurmSettings
from advisor.slurm.runner import LocalRunner, SshRunner, runner_for

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "etc" / "advisor.toml"
ADVISOR = str(Path(sys.executable).parent / "advisor")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "advisor.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_without_a_file_everything_lives_in_the_users_state_folder(tmp_path: Path) -> None:
    settings = load_settings({"HOME": str(tmp_path)})
    state = tmp_path / ".local" / "state" / "advisor"
    assert settings.state_dir == state
    assert settings.database == state / "advisor.db"
    assert (settings.models_dir, settings.bench_dir) == (state / "models", state / "bench")
    assert settings.socket == Path("/run/advisor/advisor.sock")
    assert settings.timeout_s == 2
    assert settings.slurm == SlurmSettings()
    assert (settings.gpu_specs / "Tesla_T4.json").is_file(), "the package's own specifications"


def test_the_file_then_the_variables_decide(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'state_dir = "/srv/advisor"\nsocket = "/srv/advisor.sock"\ntimeout_s = 7\n'
        '[slurm]\nenv = { SLURM_CONF = "/etc/slurm/cluster.conf" }\n',
    )
    from_file = load_settings({"ADVISOR_CONFIG": str(path)})
    assert from_file.database == Path("/srv/advisor/advisor.db"), "paths follow the file's state_dir"
    assert (from_file.socket, from_file.timeout_s) == (Path("/srv/advisor.sock"), 7)
    environ = {
        "ADVISOR_CONFIG": str(path),
        "ADVISOR_STATE_DIR": "/elsewhere",
        "ADVISOR_TIMEOUT": "3.5",
        "SLURM_CONF": "/home/me/sandbox/slurm.conf",
    }
    over = load_settings(environ)
    assert over.database == Path("/elsewhere/advisor.db")
    assert (over.socket, over.timeout_s) == (Path("/srv/advisor.sock"), 3.5)
    assert over.slurm.env == {"SLURM_CONF": "/etc/slurm/cluster.conf"}, "the file names its cluster"
    shell = load_settings({"HOME": str(tmp_path), "SLURM_CONF": "/home/me/sandbox/slurm.conf"})
    assert shell.slurm.env == {"SLURM_CONF": "/home/me/sandbox/slurm.conf"}, "else the shell's"
    named = tmp_path / "other.toml"
    named.write_text("timeout_s = 9\n")
    assert load_settings({"ADVISOR_CONFIG": str(path)}, named).timeout_s == 9, "--config wins"


def test_every_problem_of_the_file_names_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'socket = "/run/a.sock"\ntimeout = 5\ntimeout_s = "soon"\n\n[slurm]\nmode = "ssh"\nhost = "login1"\n',
    )
    with pytest.raises(SettingsError) as caught:
        load_settings({"ADVISOR_CONFIG": str(path)})
    lines = str(caught.value).splitlines()
    assert lines[0] == f"{path}:2: timeout: unknown key; did you mean 'timeout_s'?"
    assert lines[1].startswith(f"{path}:3: timeout_s: Input should be a valid number")
    assert lines[2] == f"{path}:5: slurm: Value error, mode 'ssh' needs user, key"
    with pytest.raises(SettingsError, match=r"advisor\.toml:1:10: Invalid value"):
        load_settings({}, write(tmp_path, "socket = \n"))
    with pytest.raises(SettingsError, match=r"absent\.toml: cannot read: No such file"):
        load_settings({}, tmp_path / "absent.toml")


def test_a_bad_variable_is_named_whatever_the_file_says(tmp_path: Path) -> None:
    path = write(tmp_path, "timeout_s = 5\n")
    with pytest.raises(SettingsError) as caught:
        load_settings({"ADVISOR_CONFIG": str(path), "ADVISOR_TIMEOUT": "0"})
    assert str(caught.value) == ("environment: ADVISOR_TIMEOUT: '0': Input should be greater than 0")
    with pytest.raises(SettingsError, match="ADVISOR_TIMEOUT: 'soon' is not a number of seconds"):
        caller_settings({"ADVISOR_TIMEOUT": "soon"})


def test_advise_submit_reads_the_same_settings(tmp_path: Path) -> None:
    assert caller_settings({"ADVISOR_SOCKET": "/tmp/a.sock", "ADVISOR_TIMEOUT": "4"}) == CallerSettings(
        Path("/tmp/a.sock"), 4.0, "advisor"
    )
    path = write(tmp_path, 'socket = "/srv/advisor.sock"\ndaemon_user = "svc"\n')
    from_file = caller_settings({"ADVISOR_CONFIG": str(path), "ADVISOR_TIMEOUT": "4"})
    assert from_file == CallerSettings(Path("/srv/advisor.sock"), 4.0, "svc")


def test_the_documented_example_holds_every_key_and_its_defaults() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    uncommented = "\n".join(line.removeprefix("# ") for line in text.splitlines() if " = " in line)
    keys = {line.split(" = ")[0].strip() for line in uncommented.splitlines()}
    assert set(Settings.model_fields) - {"allow_root", "slurm", "models", "bench"} <= keys
    sections = (SlurmSettings, ModelSettings, BenchSettings)
    assert {key for section in sections for key in section.model_fields} <= keys
    assert tomllib.loads(text) == {
        "slurm": {"mode": "local"},
        "models": {"retrain": "timer", "max_worse_mape": 0.02},
        "bench": {},
    }
    example = load_settings({"HOME": "/home/me"}, EXAMPLE)
    assert example == load_settings({"HOME": "/home/me"}), "as written, it changes nothing"


def test_the_settings_choose_the_runner(tmp_path: Path) -> None:
    local = runner_for(SlurmSettings(env={"SLURM_CONF": "/etc/slurm/slurm.conf"}))
    assert isinstance(local, LocalRunner)
    remote = runner_for(SlurmSettings(mode="ssh", host="login1", user="advisor", key=tmp_path / "key"))
    assert isinstance(remote, SshRunner)


def test_the_commands_take_their_defaults_from_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, f'database = "{tmp_path / "shared.db"}"\n')
    result = subprocess.run(
        [ADVISOR, "--config", str(path), "daemon", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
        check=True,
    )
    assert "--config FILE" not in result.stdout, "a global option, shown by `advisor --help`"
    assert str(tmp_path / "shared.db") in result.stdout
    broken = write(tmp_path, "socket = 5\n")
    failed = subprocess.run(
        [ADVISOR, "--config", str(broken), "status"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failed.returncode == 1
    assert failed.stderr == f"advisor: error: {broken}:1: socket: Input should be a valid path, not 5\n"


def test_advise_submit_with_a_broken_settings_file_submits_unchanged(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH -p t4\n#ADVISOR --model=resnet18 --steps=10\ntrue\n")
    broken = write(tmp_path, "timeout_s = -1\n")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "advise-submit"), "--dry-run", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ADVISOR_CONFIG": str(broken)},
    )
    warning = f"advise-submit: warning: the advisor's settings are unusable: {broken}:1: timeout_s: "
    first = result.stderr.splitlines()[0]
    assert result.stderr.startswith(warning) and "; asking Slurm about the job unchanged" in first


@pytest.mark.parametrize(
    "words",
    [["report"], ["models", "evaluate"], ["models", "train"]],
    ids=["report", "evaluate", "train"],
)
def test_a_command_that_reads_the_database_creates_no_stray_one(
    words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "state" / "advisor.db"
    assert cli.main([*words, "--db", str(missing)]) == 1
    assert capsys.readouterr().err.startswith(f"advisor: error: no advisor database at {missing}: name")
    assert not missing.exists() and not missing.parent.exists()


def test_status_without_a_database_still_reports_the_daemon_and_creates_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISOR_SOCKET", str(tmp_path / "absent.sock"))
    missing = tmp_path / "state" / "advisor.db"
    assert cli.main(["status", "--db", str(missing), "--json"]) == 3, "3: the daemon is down"
    report = json.loads(capsys.readouterr().out)
    assert report["daemon"] is None and report["database_error"].startswith(
        f"no advisor database at {missing}"
    )
    assert report["models"] == [] and not missing.parent.exists()
