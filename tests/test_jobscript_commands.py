"""Job descriptions read from the training command line, as users write their scripts: four conventions,
launchers, line continuations, variables, comments; what the script computes at run time is not guessed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from advisor.jobscript.errors import ScriptError
from advisor.jobscript.submission import parse_job

from .daemon_support import BIN

IMAGENET = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gres=gpu:4
#SBATCH --time=2-00:00:00
# PyTorch's ImageNet example, one process per node spawning one per GPU
export MASTER=$(hostname)
srun python main.py -a resnet50 -b 256 --epochs 90 \\
    --dist-url "tcp://$MASTER:23456" --dist-backend nccl \\
    --multiprocessing-distributed --world-size 2 --rank $SLURM_NODEID /datasets/imagenet
"""

TORCHVISION = """#!/bin/bash
#SBATCH --partition=t4
#SBATCH --gres=gpu:4
BS=64   # per GPU
EPOCHS=90
# torchvision's classification reference
torchrun --nproc_per_node=4 train.py \\
    --model resnet50 \\
    --batch-size $BS --epochs ${EPOCHS} \\
    --data-path /datasets/imagenet --amp
"""

TIMM = """#!/bin/sh
#SBATCH --gpus-per-node=2
NGPU=$(nvidia-smi -L | wc -l)
torchrun --nproc_per_node=$NGPU train.py /data/cifar10 --model efficientnet_b0 -b 128 \\
    --grad-accum-steps 2 --epochs 450 --amp   # timm
"""

HF = """#!/bin/bash
#SBATCH --gres=gpu:2
python -m torch.distributed.run --nproc-per-node 2 run_image_classification.py \\
    --model_name_or_path convnext_tiny --dataset_name food101 \\
    --per-device-train-batch-size 32 --gradient_accumulation_steps 4 --max_steps 5000 --fp16
"""


def _parsed(tmp_path: Path, text: str) -> tuple[dict[str, object], str | None]:
    script = tmp_path / "job.sh"
    script.write_text(text, encoding="utf-8")
    parsed = parse_job(text.encode(), str(script), [str(script)], {})
    assert parsed.description is not None, "a description was inferred"
    return parsed.description.model_dump(), parsed.inferred_from


@pytest.mark.parametrize(
    ("text", "expected", "line", "style"),
    [
        (IMAGENET, {"model": "resnet50", "global_batch": 512, "epochs": 90, "dataset_size": 1281167}, 7, "imagenet"),  # noqa: E501
        (TORCHVISION, {"model": "resnet50", "global_batch": 256, "epochs": 90, "dataset_size": 1281167}, 7, "torchvision"),  # noqa: E501
        (HF, {"model": "convnext_tiny", "global_batch": 256, "steps": 5000}, 3, "hf"),
    ],
)  # fmt: skip
def test_each_convention_is_read_as_its_program_reads_its_flags(
    tmp_path: Path, text: str, expected: dict[str, object], line: int, style: str
) -> None:
    description, source = _parsed(tmp_path, text)
    assert {key: description[key] for key in expected} == expected
    assert description["allow_amp"] is False and description["follows_advice"] is False, (
        "the script follows its own flags, not the advice's variables"
    )
    assert source is not None and source.startswith(f"{tmp_path / 'job.sh'}:{line} ({style}): ")


def test_a_dataset_sets_the_input_and_classes_and_epochs_need_one(tmp_path: Path) -> None:
    description, _ = _parsed(tmp_path, HF)
    assert description["input_shape"] == (3, 224, 224) and description["model_kwargs"] == {"num_classes": 101}
    no_data = TORCHVISION.replace("--data-path /datasets/imagenet", "--data-path /scratch/mine")
    script = tmp_path / "mine.sh"
    script.write_text(no_data)
    parsed = parse_job(no_data.encode(), str(script), [str(script)], {})
    assert parsed.description is None, "epochs without a known dataset size: nothing is inferred"
    explicit = no_data.replace(
        "BS=64", "#ADVISOR --dataset-size=1000 --model=resnet18 --global-batch=8 --steps=10\nBS=64"
    )
    parsed = parse_job(explicit.encode(), str(script), [str(script)], {})
    assert (
        parsed.description is not None
        and parsed.description.model == "resnet18"
        and parsed.inferred_from is None
    )


def test_a_value_computed_at_run_time_is_not_guessed(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(TIMM)
    parsed = parse_job(TIMM.encode(), str(script), [str(script)], {})
    # The launcher's own $NGPU is unknown but is not the batch: the batch, per process, is.
    assert parsed.description is not None and parsed.description.global_batch == 128 * 2 * 2
    computed = TIMM.replace("-b 128", "-b $((64 * 2))")
    parsed = parse_job(computed.encode(), str(script), [str(script)], {})
    assert parsed.description is None
    from_shell = TIMM.replace("-b 128", "-b $BATCH")
    parsed = parse_job(from_shell.encode(), str(script), [str(script)], {})
    assert parsed.description is None, "a variable the script never sets is not guessed"


def test_explicit_advisor_lines_win_and_a_style_can_be_named(tmp_path: Path) -> None:
    text = TORCHVISION.replace("BS=64", "#ADVISOR --global-batch=1024\nBS=64")
    description, source = _parsed(tmp_path, text)
    assert description["global_batch"] == 1024 and description["model"] == "resnet50" and source
    named = TIMM.replace(
        "#SBATCH --gpus-per-node=2", "#SBATCH --gpus-per-node=2\n#ADVISOR --command-style=torchvision"
    )
    description, source = _parsed(tmp_path, named)
    assert source is not None and "(torchvision)" in source and description["global_batch"] == 256
    script = tmp_path / "bad.sh"
    bad = "#!/bin/sh\n#ADVISOR --command-style=keras\npython train.py\n"
    with pytest.raises(ScriptError, match="command-style"):
        parse_job(bad.encode(), str(script), [str(script)], {})


def test_bodies_that_say_nothing_usable_infer_nothing(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    for body in ("echo 'unbalanced\n", "python train.py --lr 0.1\n", "bash run.sh\n", "\n" * 100_000):
        text = f"#!/bin/sh\n#SBATCH --gres=gpu:1\n{body}"
        assert parse_job(text.encode(), str(script), [str(script)], {}).description is None


def test_advisor_parse_json_shows_what_was_inferred_and_from_where(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(TORCHVISION)
    result = subprocess.run(
        [str(BIN / "advisor"), "parse", str(script), "--json"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    parsed = json.loads(result.stdout)
    assert parsed["description"]["model"] == "resnet50" and parsed["description"]["global_batch"] == 256
    assert parsed["inferred_from"].startswith(
        f"{script}:7 (torchvision): torchrun --nproc_per_node=4 train.py"
    )
