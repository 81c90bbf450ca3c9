"""The parser against real sbatch 22.05: every corpus script is submitted held to the sandbox cluster,
and what the parser read must be what ``scontrol show job`` says sbatch understood (or both refuse it)."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import check_script
from advisor.jobscript.request import JobRequest, build_request
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import Record
from advisor.slurm.runner import LocalRunner, SlurmError
from advisor.slurm.values import parse_duration, parse_gres

CORPUS = Path(__file__).parent / "data" / "scripts"
CASES: list[dict[str, Any]] = tomllib.loads((CORPUS / "cases.toml").read_text())["case"]
GPU_FIELD = {"job": "TresPerJob", "node": "TresPerNode", "task": "TresPerTask"}

pytestmark = pytest.mark.slurm


def test_the_corpus_covers_enough_cases() -> None:
    assert len(CASES) >= 40
    assert {path.stem for path in CORPUS.glob("*.sh")} == {case["name"] for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_parser_reads_the_script_as_sbatch_does(case: dict[str, Any], sandbox: Sandbox) -> None:
    path = CORPUS / f"{case['name']}.sh"
    options = ["--hold", *case.get("args", [])]
    env: dict[str, str] = case.get("env", {})
    slurm = SlurmClient(LocalRunner(env={**sandbox.client_env(), **env}), timeout_s=20)
    parsed = _parse(path, [*options, str(path), *case.get("script_args", [])], env)
    try:
        # Script arguments cannot reach sbatch through submit(); sbatch never reads them as options anyway.
        result = slurm.submit(None, options, script_path=str(path))
    except SlurmError as refused:
        assert isinstance(parsed, ScriptError), f"sbatch refused ({refused.stderr}) but the parser accepted"
        assert case.get("error"), f"sbatch refused an accepted case: {refused.stderr}"
        assert case["error"] in refused.stderr
        assert case["error"] in parsed.reason
        return
    try:
        assert not case.get("error"), "sbatch accepted a case marked as refused"
        assert isinstance(parsed, JobRequest), f"the parser refused what sbatch accepted: {parsed}"
        _assert_same(parsed, slurm.show_job(result.job_id), path)
    finally:
        slurm.cancel(result.job_id)


def _parse(path: Path, argv: list[str], env: dict[str, str]) -> JobRequest | ScriptError:
    try:
        text = check_script(path.read_bytes(), path.name)
        return build_request(text, argv, env, path.name)
    except ScriptError as error:
        return error


def _assert_same(parsed: JobRequest, job: Record, path: Path) -> None:
    """Field by field, for what the user set; defaults are the controller's business."""
    assert job["JobName"] == (parsed.job_name if parsed.job_name is not None else path.name)
    if parsed.partitions:
        assert [name for name in job["Partition"].split(",") if name] == parsed.partitions
    if "time" in parsed.options:
        assert parse_duration(job["TimeLimit"]) == parsed.time_limit
    if "time-min" in parsed.options:
        assert parse_duration(job["TimeMin"]) == parsed.time_min
    if parsed.gpus is None:
        assert not any(parse_gres(job.get(field, "")) for field in GPU_FIELD.values())
    else:
        gpus = parse_gres(job.get(GPU_FIELD[parsed.gpus.per], ""))
        assert gpus is not None
        assert (gpus.count, gpus.type) == (parsed.gpus.count, parsed.gpus.type)
    if parsed.nodes_min is not None:
        assert job["NumNodes"] == f"{parsed.nodes_min}-{parsed.nodes_max}"
    if parsed.ntasks is not None:
        assert int(job["NumTasks"]) == parsed.ntasks
    if parsed.cpus_per_task is not None:
        assert int(job["CPUs/Task"]) == parsed.cpus_per_task


VARIABLE_CASES = {
    "two nodes, tasks and GPUs per node": "--partition=a100 --nodes=2 --ntasks-per-node=2 --gres=gpu:2 -c 1",
    "GPUs per node, nothing else": "--partition=v100 --gpus-per-node=2",
    "GPUs per task on one node": "--partition=a100 --nodes=1 --ntasks=2 --gpus-per-task=1",
    "a node range": "--partition=t4 --nodes=1-2 --gres=gpu:1",
}


def test_the_variables_a_request_fixes_are_the_ones_slurm_sets(sandbox: Sandbox, tmp_path: Path) -> None:
    """`JobRequest.job_variables` against a real job's environment: each variable it claims, Slurm sets to
    that value (a script's ``--num_nodes=$SLURM_NNODES`` is read by them)."""
    slurm = SlurmClient(LocalRunner(env=sandbox.client_env()), timeout_s=20)
    claimed = {}
    for number, options in enumerate(VARIABLE_CASES.values()):
        argv = [*options.split(), "--time=1", "--mem=100", "--output=/dev/null"]
        claimed[number] = build_request(f"{SHEBANG_SRUN}", [*argv, "job.sh"], {}, "job.sh").job_variables()
        written = tmp_path / f"{number}.env"
        slurm.submit(f"#!/bin/sh\nenv > {written}.part && mv {written}.part {written}\n", argv)
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"{number}.env").exists() for number in claimed):
        assert time.monotonic() < deadline, "the jobs never ran"
        time.sleep(0.5)
    for number, variables in claimed.items():
        lines = (tmp_path / f"{number}.env").read_text().splitlines()
        environment = dict(line.split("=", 1) for line in lines if "=" in line)
        assert {name: environment.get(name) for name in variables} == variables
    assert claimed[0] == {
        "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "SLURM_NTASKS": "4", "SLURM_NPROCS": "4",
        "SLURM_NTASKS_PER_NODE": "2", "SLURM_CPUS_PER_TASK": "1", "SLURM_GPUS_ON_NODE": "2",
    }  # fmt: skip
    assert claimed[1] == {"SLURM_JOB_NUM_NODES": "1", "SLURM_NNODES": "1", "SLURM_GPUS_ON_NODE": "2",
                          "SLURM_GPUS_PER_NODE": "2"}  # fmt: skip
    assert claimed[2]["SLURM_GPUS_ON_NODE"] == "2" and claimed[2]["SLURM_NTASKS"] == "2"
    assert "SLURM_NNODES" not in claimed[3], "a range fixes no node count"


SHEBANG_SRUN = "#!/bin/sh\nsrun true\n"
