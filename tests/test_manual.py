"""Shell completion and the manual page, generated from the parser (`advisor completion bash`, `advisor man`):
what bash completes, and a page `man` renders with every command and option."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.cli import COMMAND_MODULES, every_command, main
from advisor.manual import walk
from advisor.settings import load_settings

ADVISOR = str(Path(sys.executable).parent / "advisor")


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("completion") / "advisor.bash"
    with path.open("w") as out:
        subprocess.run([ADVISOR, "completion", "bash"], stdout=out, check=True, timeout=120)
    return path


@pytest.mark.parametrize(
    ("typed", "offered"),
    [
        ("advisor mo", ["models"]),
        ("advisor models ", ["train", "list", "activate", "evaluate", "-h", "--help"]),
        ("advisor models list --j", ["--json"]),
        ("advisor --config site.toml sandbox st", ["status"]),
        ("advisor predict --sequence", ["--sequence-length"]),
    ],
)
def test_bash_completes_commands_and_their_options(script: Path, typed: str, offered: list[str]) -> None:
    probe = (
        f"source {script}; read -ra COMP_WORDS <<< \"$1\"; [[ \"$1\" == *' ' ]] && COMP_WORDS+=('');"
        ' COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _advisor; echo "${COMPREPLY[*]}"'
    )
    done = subprocess.run(["bash", "-c", probe, "-", typed], capture_output=True, text=True, timeout=30)
    assert done.stdout.split() == offered, done.stderr


def test_the_manual_names_every_command_and_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["man"]) == 0
    page = capsys.readouterr().out
    commands = list(walk(every_command(load_settings({}, None))))
    assert {name for _, names in COMMAND_MODULES for name in names} <= {c.path for c in commands}
    for command in commands[1:]:
        assert f'.SS "advisor {command.path.replace("-", chr(92) + "-")}"' in page
        for flags, _ in command.options:
            assert f".B {flags.replace('-', chr(92) + '-')}" in page, (command.path, flags)
    if shutil.which("man"):
        shown = subprocess.run(
            ["man", "-l", "-"], input=page, capture_output=True, text=True, timeout=60, check=True
        )
        assert "advisor models list" in shown.stdout and "--sequence-length" in shown.stdout
