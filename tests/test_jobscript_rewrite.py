"""Rewriting a submission to follow advice: exactly the advised change, nothing else."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor import contract
from advisor.jobscript.rewrite import Advice, AdviceError, apply_advice
from advisor.jobscript.submission import ParsedSubmission, parse_job
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.client import SlurmClient
from advisor.slurm.runner import LocalRunner

PARTITIONS = {"a100", "v100", "t4", "cpu"}

FLAG_SCRIPT = """#!/bin/bash
#SBATCH --partition=t4
#SBATCH --gres=gpu:t4:1,tmpdisk:10
#SBATCH --time=01:00:00
#ADVISOR --model=resnet18 --global-batch=128 --steps=100 --batch-flag=--batch-size
echo "batch --batch-size 128 in a message stays"
python train.py --batch-size 128 --lr 0.1
python eval.py --batch-size=128
"""


def parse(script: str, argv: list[str], environ: dict[str, str] | None = None) -> ParsedSubmission:
    return parse_job(script.encode(), "job.sh", argv, environ or {})


def test_advice_becomes_command_line_options_in_the_users_own_form() -> None:
    parsed = parse(FLAG_SCRIPT, ["--mem=1G", "job.sh"])
    advice = Advice(partition="v100", gpus=2, gpu_type="v100", time_limit=timedelta(minutes=90))
    submission = apply_advice(parsed.request, None, ["--mem=1G", "job.sh"], advice, PARTITIONS)
    assert submission.argv == [
        "--mem=1G",
        "--partition=v100",
        "--gres=gpu:v100:2,tmpdisk:10",
        "--time=01:30:00",
        "job.sh",
    ]
    assert submission.stdin is None
    assert submission.env == {}
    assert submission.rewritten


@pytest.mark.parametrize(
    ("directive", "expected"),
    [
        ("--gpus=2", "--gpus=a100:4"),
        ("--gpus-per-node=t4:2", "--gpus-per-node=a100:4"),
        ("--gpus-per-task=1", "--gpus-per-task=a100:4"),
    ],
)
def test_every_gpu_form_is_replaced_by_the_same_form(directive: str, expected: str) -> None:
    script = f"#!/bin/sh\n#SBATCH {directive}\n#SBATCH --ntasks=1\ntrue\n"
    parsed = parse(script, ["job.sh"])
    submission = apply_advice(parsed.request, None, ["job.sh"], Advice(gpus=4, gpu_type="a100"), PARTITIONS)
    assert submission.argv == [expected, "job.sh"]


def test_the_batch_flag_is_substituted_and_nothing_else_changes() -> None:
    parsed = parse(FLAG_SCRIPT, ["job.sh"])
    advice = Advice(micro_batch=32, grad_accum=4)
    submission = apply_advice(parsed.request, parsed.description, ["job.sh"], advice, PARTITIONS)
    assert submission.stdin is not None
    assert submission.argv == ["--job-name=job.sh"], "on stdin the job keeps the file's name"
    changed = [
        (a, b) for a, b in zip(FLAG_SCRIPT.splitlines(), submission.stdin.splitlines(), strict=True) if a != b
    ]
    assert changed == [
        (
            'echo "batch --batch-size 128 in a message stays"',
            'echo "batch --batch-size 32 in a message stays"',
        ),
        ("python train.py --batch-size 128 --lr 0.1", "python train.py --batch-size 32 --lr 0.1"),
        ("python eval.py --batch-size=128", "python eval.py --batch-size=32"),
    ]
    assert submission.env == {
        contract.MICRO_BATCH: "32",
        contract.GRAD_ACCUM: "4",
        contract.GLOBAL_BATCH: "128",
    }


def test_a_non_literal_batch_flag_is_left_alone() -> None:
    script = FLAG_SCRIPT.replace("--batch-size 128 --lr", '--batch-size "$BS" --lr')
    parsed = parse(script, ["job.sh"])
    submission = apply_advice(
        parsed.request, parsed.description, ["job.sh"], Advice(micro_batch=8), PARTITIONS
    )
    assert submission.stdin is None
    assert submission.argv == ["job.sh"]
    assert submission.env[contract.MICRO_BATCH] == "8"
    assert any("non-literal" in note for note in submission.notes)


def test_a_script_with_arguments_stays_a_file() -> None:
    parsed = parse(FLAG_SCRIPT, ["job.sh", "extra"])
    submission = apply_advice(
        parsed.request, parsed.description, ["job.sh", "extra"], Advice(micro_batch=8), PARTITIONS
    )
    assert (submission.stdin, submission.argv) == (None, ["job.sh", "extra"])


@pytest.mark.parametrize(
    ("export", "expected"),
    [
        ("NONE", "--export=ADVISOR_AMP=bf16"),
        ("HOME,PATH", "--export=HOME,PATH,ADVISOR_AMP=bf16"),
    ],
)
def test_a_restricted_export_names_the_advisor_variables(export: str, expected: str) -> None:
    script = f"#!/bin/sh\n#SBATCH --export={export}\ntrue\n"
    parsed = parse(script, ["job.sh"])
    submission = apply_advice(parsed.request, None, ["job.sh"], Advice(amp="bf16"), PARTITIONS)
    assert submission.argv == [expected, "job.sh"]
    assert submission.env == {}


@pytest.mark.parametrize(
    "extra",
    ["#SBATCH hetjob\n#SBATCH -p cpu\n", "#PBS -l walltime=1:00:00\n", "#BSUB -W 60\n"],
)
def test_hetjob_and_foreign_scripts_are_advised_but_never_rewritten(extra: str) -> None:
    script = f"#!/bin/sh\n#SBATCH -p t4 --gpus=1\n{extra}true\n"
    parsed = parse(script, ["job.sh"])
    submission = apply_advice(parsed.request, None, ["job.sh"], Advice(partition="a100"), PARTITIONS)
    assert submission.argv == ["job.sh"]
    assert not submission.rewritten
    assert submission.notes and "never rewritten" in submission.notes[0]


@pytest.mark.parametrize(
    ("advice", "message"),
    [
        (Advice(partition="a100\n#SBATCH --uid=0"), "not one of the cluster's"),
        (Advice(partition="gpu;rm -rf /"), "not one of the cluster's"),
        (Advice(gpus=2, gpu_type="a100 --uid=0"), "not a gres type name"),
        (Advice(gpus=2, gpu_type="$(reboot)"), "not a gres type name"),
    ],
)
def test_unsafe_values_are_refused(advice: Advice, message: str) -> None:
    parsed = parse(FLAG_SCRIPT, ["job.sh"])
    with pytest.raises(AdviceError, match=message):
        apply_advice(parsed.request, None, ["job.sh"], advice, PARTITIONS)


def test_gpus_are_never_added_to_a_cpu_job() -> None:
    parsed = parse("#!/bin/sh\n#SBATCH -p cpu\ntrue\n", ["job.sh"])
    with pytest.raises(AdviceError, match="no GPUs"):
        apply_advice(parsed.request, None, ["job.sh"], Advice(gpus=1), PARTITIONS)


@given(
    partition=st.none() | st.sampled_from(sorted(PARTITIONS)),
    gpus=st.none() | st.integers(1, 8),
    minutes=st.none() | st.integers(1, 10_000),
    micro_batch=st.none() | st.integers(1, 4096),
)
def test_a_rewrite_reparses_to_exactly_the_advised_request(
    partition: str | None, gpus: int | None, minutes: int | None, micro_batch: int | None
) -> None:
    argv = ["--mem=2G", "--job-name=keep me", "job.sh"]
    parsed = parse(FLAG_SCRIPT, argv)
    advice = Advice(
        partition=partition,
        gpus=gpus,
        time_limit=None if minutes is None else timedelta(minutes=minutes),
        micro_batch=micro_batch,
    )
    submission = apply_advice(parsed.request, parsed.description, argv, advice, PARTITIONS)
    script = submission.stdin if submission.stdin is not None else FLAG_SCRIPT
    again = parse(script, submission.argv).request
    before = parsed.request
    assert again.partitions == ([partition] if partition else before.partitions)
    assert again.time_limit == (timedelta(minutes=minutes) if minutes else before.time_limit)
    assert again.gpus is not None and before.gpus is not None
    assert again.gpus.count == (gpus or before.gpus.count)
    assert again.gpus.type == before.gpus.type
    assert again.job_name == before.job_name
    untouched = {"partition", "gres", "time"}
    assert {k: v for k, v in again.options.items() if k not in untouched} == {
        k: v for k, v in before.options.items() if k not in untouched
    }


def test_slurm_runs_the_rewritten_job_as_advised(sandbox: Sandbox, tmp_path: Path) -> None:
    path = tmp_path / "job.sh"
    out = tmp_path / "seen.txt"
    path.write_text(
        "#!/bin/bash\n#SBATCH --partition=t4\n#SBATCH --gres=gpu:t4:1\n#SBATCH --time=10\n"
        "#ADVISOR --model=resnet18 --global-batch=64 --steps=10 --batch-flag=--batch-size\n"
        f'echo "env=$ADVISOR_MICRO_BATCH accum=$ADVISOR_GRAD_ACCUM flag=" --batch-size 64 > {out}\n'
    )
    argv = ["--mem=100", str(path)]
    parsed = parse_job(path.read_bytes(), str(path), argv, {})
    advice = Advice(
        partition="v100",
        gpus=2,
        gpu_type="v100",
        time_limit=timedelta(minutes=45),
        micro_batch=16,
        grad_accum=4,
    )
    submission = apply_advice(parsed.request, parsed.description, argv, advice, PARTITIONS)
    client = SlurmClient(LocalRunner(env={**sandbox.client_env(), **submission.env}))
    assert submission.stdin is not None
    job_id = client.submit(submission.stdin, submission.argv).job_id
    record = client.show_job(job_id)
    assert record["Partition"] == "v100"
    assert record["TimeLimit"] == "00:45:00"
    assert record["TresPerNode"] == "gres:gpu:v100:2"
    assert record["JobName"] == "job.sh"
    assert record["MinMemoryNode"] == "100M"
    deadline = time.monotonic() + 60
    while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert out.read_text() == "env=16 accum=4 flag= --batch-size 16\n"
