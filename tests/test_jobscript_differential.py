"""The parser against real sbatch 22.05: every corpus script is submitted held to the sandbox cluster,
and what the parser read must be what ``scontrol show job`` says sbatch understood (or both refuse it)."""

from __future__ import annotations

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
