"""The files a training command names (a recipe, accelerate's, DeepSpeed's) are read in the user's process
and sent with the script, so the daemon, which opens no user's file, describes config-driven jobs too."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.api import MAX_SENT_FILES, AdviseRequest
from advisor.daemon.transport import UnixHTTPConnection
from advisor.jobscript.submission import MAX_NAMED_FILE_BYTES, sent_files
from advisor.remote_advice import request_for
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient

from .daemon_support import BIN, Daemon, jobs_named, started_daemon
from .test_jobscript_trainers import RECIPE

SCRIPT = (
    "#!/bin/bash\n#SBATCH --partition=t4\n#SBATCH --gres=gpu:1\n#SBATCH --time=1-00:00:00\n"
    "#SBATCH --job-name={name}\n#SBATCH --output=/dev/null\npython sft.py --config {recipe}\n"
)


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    server = started_daemon(sandbox, tmp_path_factory.mktemp("daemon"))
    yield server
    server.stop()


def _advised(
    daemon: Daemon, folder: Path, name: str, recipe: str, how: str = "--dry-run"
) -> tuple[dict[str, Any], str]:
    """advise-submit ``how`` --json of a script whose command names ``recipe``, run where it lies: its JSON
    and what it said on stderr."""
    script = folder / f"{name}.sbatch"
    script.write_text(SCRIPT.format(name=name, recipe=recipe), encoding="utf-8")
    result = subprocess.run(
        [str(BIN / "advise-submit"), how, "--json", str(script)],
        env=daemon.env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def _posted(daemon: Daemon, request: AdviseRequest) -> tuple[int, dict[str, Any]]:
    connection = UnixHTTPConnection(daemon.socket, timeout=60)
    try:
        connection.request("POST", "/advise", body=request.model_dump_json().encode())
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_a_recipe_the_command_names_is_read_by_the_user_and_described_by_the_daemon(
    daemon: Daemon, tmp_path: Path
) -> None:
    """Before, the daemon read no recipe: 'no #ADVISOR job description: nothing to predict'."""
    (tmp_path / "recipe.yaml").write_text(RECIPE, encoding="utf-8")
    recommendation = _advised(daemon, tmp_path, "sft", "recipe.yaml")[0]["advice"]["recommendation"]
    assert not any("recipe.yaml" in reason for reason in recommendation["reasons"]), recommendation["reasons"]
    batch = recommendation["baseline"]["candidate"]
    assert (batch["global_batch"], batch["micro_batch"], batch["accumulation"]) == (32, 4, 8)


def test_files_over_the_caps_are_left_out_and_the_job_still_goes_in_once(
    daemon: Daemon, local_slurm: SlurmClient, tmp_path: Path
) -> None:
    """A file over a megabyte is not read, as `advisor parse` reads none; more files than a request takes
    are refused by the daemon (a 400 that names the cap), and advise-submit asks again without them."""
    (tmp_path / "big.yaml").write_text(RECIPE + "#" * MAX_NAMED_FILE_BYTES, encoding="utf-8")
    extra = [f"extra{number}.yaml" for number in range(MAX_SENT_FILES)]
    for name in ["recipe.yaml", *extra]:
        (tmp_path / name).write_text(RECIPE, encoding="utf-8")
    for name, recipe in (("big", "big.yaml"), ("many", " ".join(["recipe.yaml", *extra]))):
        shown, said = _advised(daemon, tmp_path, name, recipe, "--yes")
        assert shown["advice"]["request_id"], "advised"
        assert shown["advice"]["recommendation"]["candidates"] == [], "described by no file"
        assert shown["stdout"].startswith("Submitted batch job"), shown
        assert jobs_named(local_slurm, name) == ["t4"], "submitted once, as written"
        refused = (
            "advise-submit: note: advised without the files the job's command names (malformed request: "
            f"files: {MAX_SENT_FILES + 1} named files: at most {MAX_SENT_FILES} are taken)"
        )
        assert (refused in said.splitlines()) == (name == "many"), said


def test_the_daemon_reads_the_files_sent_and_never_the_file_system(daemon: Daemon, tmp_path: Path) -> None:
    absent = str(tmp_path / "absent" / "recipe.yaml")
    script = SCRIPT.format(name="sent", recipe=absent).encode()
    request = AdviseRequest.of(
        script, where="sent.sbatch", sbatch_argv=["sent.sbatch"], files={absent: RECIPE}
    )
    status, answer = _posted(daemon, request)
    assert status == 200, answer
    assert answer["recommendation"]["baseline"]["candidate"]["global_batch"] == 32
    too_many = {f"{number}.yaml": RECIPE for number in range(MAX_SENT_FILES + 1)}
    status, answer = _posted(daemon, request.model_copy(update={"files": too_many}))
    assert (status, answer["error"]) == (
        400,
        f"malformed request: files: {MAX_SENT_FILES + 1} named files: at most {MAX_SENT_FILES} are taken",
    )


def test_the_daemons_reader_looks_names_up_in_what_was_sent_only(tmp_path: Path) -> None:
    on_disk = tmp_path / "recipe.yaml"
    on_disk.write_text("on disk", encoding="utf-8")
    read = sent_files({"recipe.yaml": "sent", str(on_disk.with_name("other.yaml")): "other"})
    assert read("recipe.yaml") == "sent"
    assert read(str(on_disk)) is None, "a file on disk that was not sent is not read"
    assert read(str(on_disk.with_name("other.yaml"))) == "other"


def test_advisor_recommend_on_a_base_install_sends_the_files_as_advise_submit_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "recipe.yaml").write_text(RECIPE, encoding="utf-8")
    script = tmp_path / "sft.sbatch"
    script.write_text(SCRIPT.format(name="sft", recipe="recipe.yaml absent.yaml"), encoding="utf-8")
    request = request_for(script, [], {"SBATCH_ACCOUNT": "lab", "HOME": "/root"})
    assert request.files == {"recipe.yaml": RECIPE}, "read where the user runs it; one that is not, not sent"
    assert request.environ == {"SBATCH_ACCOUNT": "lab"}
