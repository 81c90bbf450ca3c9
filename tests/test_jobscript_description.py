"""The #ADVISOR job description: placement, options, validation and the places errors name."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.jobscript.advisor_lines import JobDescription, parse_description
from advisor.jobscript.advisor_words import split_command_line
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.submission import parse_submission

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

SCRIPT = """#!/bin/bash
#SBATCH --partition=a100
#ADVISOR --model=resnet50 --num-classes=10
# a plain comment between directives

#ADVISOR --global-batch=256 --epochs=3 --dataset-size=50000
#ADVISOR --model-arg=dropout=0.2 --model-arg=weights=none --amp=no
python train.py
#ADVISOR --workers=99
"""


def test_lines_become_a_description() -> None:
    description = parse_description(SCRIPT, "job.sh")
    assert description == JobDescription(
        model="resnet50",
        model_kwargs={"num_classes": 10, "dropout": 0.2, "weights": "none"},
        global_batch=256,
        epochs=3,
        dataset_size=50000,
        allow_amp=False,
    )
    assert description.workers is None, "a line after the first command is not a directive"
    assert description.total_steps == 3 * 196


def test_command_line_options_win_over_the_script() -> None:
    description = parse_description(SCRIPT, "job.sh", ["--global-batch", "512", "--amp=yes"])
    assert description is not None
    assert (description.global_batch, description.allow_amp) == (512, True)


def test_no_lines_and_no_options_mean_no_description() -> None:
    assert parse_description("#!/bin/sh\n#SBATCH -p cpu\ntrue\n", "job.sh") is None


def test_a_factory_reference_and_the_flag_contract() -> None:
    script = (
        "#!/bin/sh\n#ADVISOR --model=mylab.nets:build --model-arg=width=2 --input-shape=1x28x28\n"
        "#ADVISOR --global-batch=64 --steps=1000 --batch-flag=--bs\n"
    )
    description = parse_description(script, "job.sh")
    assert description is not None
    assert description.model == "mylab.nets:build"
    assert description.input_shape == (1, 28, 28)
    assert (description.batch_via, description.batch_flag) == ("flag", "--bs")
    assert description.total_steps == 1000


@pytest.mark.parametrize(
    ("lines", "place", "message"),
    [
        ("#ADVISOR --modle=resnet50\n", "job.sh:2", "unknown #ADVISOR option '--modle'"),
        ("#ADVISOR --model=resnet50 --global-batch=many --steps=1\n", "job.sh:2", "--global-batch"),
        ("#ADVISOR --model='rm -rf /' --global-batch=8 --steps=1\n", "job.sh:2", "--model"),
        ("#ADVISOR --model=resnet18\n#ADVISOR --global-batch=8 --epochs=2\n", "job.sh", "--dataset-size"),
        ("#ADVISOR --model=resnet18 --global-batch=8 --steps=1 --amp=maybe\n", "job.sh:2", "yes or no"),
        ("#ADVISOR --model=resnet18 --global-batch=8 --steps=1 --input-shape=3x0x32\n", "job.sh:2", "shape"),
        ("#ADVISOR --model=resnet18 --global-batch\n", "job.sh:2", "needs a value"),
        (
            "#ADVISOR --model=resnet18 --steps=1\n#ADVISOR --global-batch=4096 --batch-range=64:1024\n",
            "job.sh",
            "outside --batch-range 64:1024",
        ),
    ],
)
def test_bad_lines_are_refused_naming_the_line(lines: str, place: str, message: str) -> None:
    with pytest.raises(ScriptError) as caught:
        parse_description(f"#!/bin/sh\n{lines}true\n", "job.sh")
    assert str(caught.value).startswith(f"{place}:")
    assert message in str(caught.value)


def test_command_line_errors_name_the_command_line() -> None:
    with pytest.raises(ScriptError, match=r"^command line: --steps"):
        parse_description(SCRIPT, "job.sh", ["--steps=-1"])


def test_our_options_are_told_apart_from_sbatch_options() -> None:
    words = ["--model", "vgg16", "--steps=5", "-p", "a100", "--model=x"]
    assert split_command_line(words) == (["--model", "vgg16", "--steps=5"], ["-p", "a100", "--model=x"])
    assert split_command_line(["--global-batch"]) == (["--global-batch"], [])


@pytest.mark.parametrize("script", sorted(EXAMPLES.glob("*.sbatch")), ids=lambda p: p.name)
def test_every_example_parses(script: Path) -> None:
    parsed = parse_submission(script, [], {})
    assert parsed.description is not None
    assert parsed.request.partitions
    assert parsed.request.gpus is not None


BOUNDED = (
    "#!/bin/sh\n#ADVISOR --model=resnet18 --global-batch=64 --dataset-size=1000000000\n#ADVISOR {}\ntrue\n"
)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "--global-batch=" + "1" + "0" * 30,
            "--global-batch: Input should be less than or equal to 2147483648",
        ),
        ("--steps=" + "1" + "0" * 30, "--steps: Input should be less than or equal to 1000000000"),
        ("--epochs=inf", "--epochs: Input should be a finite number"),
        ("--epochs=nan", "--epochs: Input should be a finite number"),
        ("--epochs=1e300", "--epochs: Input should be less than or equal to 1000000"),
        ("--epochs=100000 --global-batch=1", "come to more than 1000000000 steps"),
        ("--steps=5 --workers=99999999", "--workers: Input should be less than or equal to 4096"),
        ("--steps=5 --input-shape=3x99999x3", "--input-shape: Input should be less than or equal to 16384"),
        ("--steps=5 --input-shape=3x32", "--input-shape: expected CxHxW such as 3x224x224, not '3x32'"),
        ("--steps=5 --batch-range=128:256", "--global-batch 64 lies outside --batch-range 128:256"),
    ],
)
def test_every_number_has_a_bound_that_names_its_option_and_line(line: str, message: str) -> None:
    with pytest.raises(ScriptError) as caught:
        parse_description(BOUNDED.format(line), "job.sh")
    assert message in caught.value.reason
    assert caught.value.where in ("job.sh:2", "job.sh:3")
