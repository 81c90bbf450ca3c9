"""``advisor daemon --step-times FILE``: an evaluation's step times as the daemon's step predictor."""

from __future__ import annotations

import getpass
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from advisor.api import AdviseRequest
from advisor.comm.sync import Spread
from advisor.daemon.app import AdviceService, ServiceInputs
from advisor.daemon.step_times import MeasuredSteps, StepTimes, StepTimesError, load_step_times
from advisor.daemon.transport import Peer
from advisor.introspect.errors import IntrospectionError
from advisor.predict.types import NoModelError
from advisor.sandbox.cluster import Sandbox
from advisor.slurm.models import Partition

MADE_AT = "2026-12-04T00:00:00+00:00"


def curve(**changes: Any) -> dict[str, Any]:
    return {
        "model": "bert",
        "gpu_type": "a100",
        "gpus_per_node": 4,
        "nodes": 1,
        "smallest_measured": 8,
        "largest_fits": 16,
        "points": [
            {"micro_batch": 8, "step_s": 0.10, "step_p90_s": 0.12},
            {"micro_batch": 16, "step_s": 0.30, "step_p90_s": 0.36},
        ],
        **changes,
    }


def written(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "steps.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def partition(name: str, gpu_type: str | None) -> Partition:
    return Partition(
        name=name,
        state="up",
        is_default=False,
        node_names=[],
        total_cpus=8,
        max_time=None,
        default_time=None,
        gpu_type=gpu_type,
        gpus_per_node=4 if gpu_type else 0,
        cpus_per_node=8,
        memory_per_node_mb=1000,
        nodes=[],
    )


@pytest.fixture
def bert(tmp_path: Path) -> MeasuredSteps:
    times = load_step_times(written(tmp_path, {"made_at": MADE_AT, "curves": [curve()]}))
    return MeasuredSteps(times, "bert", [partition("fast", "a100"), partition("cpu", None)])


def test_a_batch_between_two_points_is_read_off_the_line_between_them(bert: MeasuredSteps) -> None:
    found = bert.step("fast", 4, 1, 12, amp=False, channels_last=False)
    # Halfway from 8 to 16: halfway from 0.10 to 0.30 s, and from 0.12 to 0.36 s.
    assert (found.step_s, found.step_p90_s) == (pytest.approx(0.20), pytest.approx(0.24))
    assert found.fits and found.largest_batch == 16
    assert found.confidence == "high", "p90 / p50 = 1.2, within the high band's 1.25"
    assert found.machine == "measured:a100" and found.note is None
    assert bert.trained_at(found.machine, found.model_version) == datetime(2026, 12, 4, tzinfo=UTC)
    assert bert.sync("fast", Spread(devices=4, nodes=1), 0.2).added_s == 0, "steps include their all-reduce"


def test_beyond_the_points_the_nearest_stands_and_the_range_says_what_fits(bert: MeasuredSteps) -> None:
    above = bert.step("fast", 4, 1, 32, amp=False, channels_last=False)
    assert (above.step_s, above.fits) == (0.30, False)
    below = bert.step("fast", 4, 1, 4, amp=False, channels_last=False)
    assert (below.step_s, below.fits, below.confidence) == (0.10, True, "low")
    assert below.note == "below the smallest batch measured (8)"


def test_a_placement_or_partition_the_file_does_not_give_has_no_prediction(bert: MeasuredSteps) -> None:
    with pytest.raises(NoModelError, match="no bert step times given for 2 a100 GPUs on each of 1 node"):
        bert.step("fast", 2, 1, 8, amp=False, channels_last=False)
    with pytest.raises(NoModelError, match="CPU"):
        bert.step("cpu", 0, 1, 8, amp=False, channels_last=False)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (
            {
                "made_at": MADE_AT,
                "curves": [curve(points=[{"micro_batch": 8, "step_s": 0.2, "step_p90_s": 0.1}])],
            },
            "curves.0.points.0: Value error, step_p90_s 0.1 is below step_s 0.2",
        ),
        (
            {"made_at": MADE_AT, "curves": [curve(points=list(reversed(curve()["points"])))]},
            "curves.0: Value error, points must be in increasing micro_batch",
        ),
        ({"made_at": MADE_AT, "curves": [curve(factory="evil:make")]}, "curves.0.factory: Extra inputs"),
        ({"made_at": "yesterday", "curves": []}, "made_at: Input should be a valid datetime"),
        ({"made_at": "2026-12-04T00:00:00", "curves": []}, "made_at: Input should have timezone info"),
    ],
)
def test_a_file_that_cannot_serve_is_refused_at_its_place(tmp_path: Path, data: object, said: str) -> None:
    path = written(tmp_path, data)
    with pytest.raises(StepTimesError) as refused:
        load_step_times(path)
    assert str(refused.value).startswith(f"{path}: {said}")


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(StepTimesError, match=r"missing\.json: cannot read: No such file"):
        load_step_times(tmp_path / "missing.json")


BERT_ON_T4 = """#!/bin/sh
#SBATCH --partition=t4
#SBATCH --gres=gpu:2
#SBATCH --time=10:00:00
#ADVISOR --model bert --global-batch 64 --steps 100000 --amp no
python train.py
"""
#: GPU type -> (GPUs per node, micro-batch, seconds a step): the global batch of 64 on one GPU or two.
STEPS = {
    "t4": [(1, 64, 1.8), (2, 32, 1.0)],
    "v100": [(1, 64, 0.9), (2, 32, 0.5)],
    "a100": [(1, 64, 0.18), (2, 32, 0.1)],
}
GPU_PARTITIONS = ["a100", "v100", "t4"]
"""The session sandbox's; its CPU partition has no step times for bert, and the policy leaves it out."""


def service(sandbox: Sandbox, tmp_path: Path, step_times: StepTimes | None) -> AdviceService:
    tmp_path.mkdir()
    policy = tmp_path / "policy.toml"
    policy.write_text(
        'mode = "rewrite"\n[tuning]\namp = false\nchannels_last = false\n'
        f"[users.{getpass.getuser()}]\npartitions = {json.dumps(GPU_PARTITIONS)}\n",
        encoding="utf-8",
    )
    inputs = ServiceInputs(database=tmp_path / "advisor.db", policy=policy, specs=[], step_times=step_times)
    return AdviceService(inputs, sandbox.client, lambda: datetime.now(UTC))


@pytest.mark.slurm
def test_a_daemon_given_step_times_advises_a_model_no_layer_table_describes(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """Sia's bert is no torchvision model: without the file the daemon has nothing to predict it with."""
    given = [
        curve(
            gpu_type=gpu_type, gpus_per_node=gpus, smallest_measured=batch, largest_fits=batch, points=[point]
        )
        for gpu_type, steps in STEPS.items()
        for gpus, batch, step_s in steps
        for point in [{"micro_batch": batch, "step_s": step_s, "step_p90_s": step_s * 1.1}]
    ]
    made_at = datetime.now(UTC).isoformat()
    times = StepTimes.model_validate_json(json.dumps({"made_at": made_at, "curves": given}))
    caller = Peer(pid=os.getpid(), uid=os.getuid(), gid=os.getgid())
    request = AdviseRequest.of(BERT_ON_T4.encode(), where="bert.sbatch", sbatch_argv=["bert.sbatch"])

    answer = service(sandbox, tmp_path / "given", times).advise(caller, request)
    found = answer.recommendation
    # 100,000 steps at the given step time, and the default policy's 2 minutes of start-up.
    runs = {(e.candidate.partition, e.candidate.gpus): e.run_s for e in found.candidates}
    expected = {(t, gpus): 100_000 * step_s + 120 for t, steps in STEPS.items() for gpus, _, step_s in steps}
    assert runs == pytest.approx(expected)
    assert {e.machine for e in found.candidates} == {f"measured:{t}" for t in STEPS}
    assert found.apply and found.chosen is not None, "the t4s are the slowest of all: the job moves"
    assert f"--partition={found.chosen.candidate.partition}" in answer.submission.argv

    with pytest.raises(IntrospectionError, match="'bert' is not a torchvision classification model"):
        service(sandbox, tmp_path / "alone", None).advise(caller, request)
