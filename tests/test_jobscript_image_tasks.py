"""torchvision's detection, segmentation, video and optical-flow references are each a train.py that takes
``--model``, as its classification reference does: their jobs are refused with why, not predicted as a
classifier at 224 pixels over ImageNet (before: fasterrcnn_resnet50_fpn, 256 a step, 1,281,167 images)."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchvision import models

from advisor.jobscript.image_jobs import CONVENTIONS, OTHER_TASKS
from advisor.jobscript.submission import parse_submission

NAMESPACES = {
    "detection": models.detection,
    "segmentation": models.segmentation,
    "video": models.video,
    "optical flow": models.optical_flow,
}


def _refusal(tmp_path: Path, command: str) -> str | None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --gres=gpu:8\n" + command, encoding="utf-8")
    parsed = parse_submission(script, [], {})
    assert parsed.description is None
    return parsed.undescribed


def test_the_detection_reference_is_refused_with_why(tmp_path: Path) -> None:
    command = (
        "torchrun --nproc_per_node=8 train.py --dataset coco --model fasterrcnn_resnet50_fpn --epochs 26 \\\n"
        "  --lr-steps 16 22 --aspect-ratio-group-factor 3 --weights-backbone ResNet50_Weights.IMAGENET1K_V1\n"
    )
    assert _refusal(tmp_path, command) == (
        f"{tmp_path / 'job.sh'}:3: fasterrcnn_resnet50_fpn is a detection model (torchvision's detection "
        "reference), which the advisor does not predict: it predicts image classification at a fixed input "
        "size and language models"
    )


@pytest.mark.parametrize("task", sorted(NAMESPACES))
def test_every_model_of_each_task_torchvision_lists_is_told(tmp_path: Path, task: str) -> None:
    """The names' beginnings against torchvision's own lists; the ImageNet example's ``-a`` too."""
    names = models.list_models(module=NAMESPACES[task])
    assert names and all(name.startswith(OTHER_TASKS[task]) for name in names)
    refused = _refusal(tmp_path, f"python main.py -a {names[0]} -b 64 /data/imagenet\n")
    assert refused is not None and f"is a {task} model" in refused


def test_no_classification_model_is_taken_for_another_task() -> None:
    classifiers = set(models.list_models(module=models)) - {
        name for namespace in NAMESPACES.values() for name in models.list_models(module=namespace)
    }
    starts = tuple(start for beginnings in OTHER_TASKS.values() for start in beginnings)
    assert len(classifiers) > 70 and not [name for name in classifiers if name.startswith(starts)]


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (  # a Lightning script of the user's own: read as 90 epochs (torchvision's), not its --max_epochs 20
            "srun python train.py --accelerator gpu --devices 4 --max_epochs 20 --batch_size 64 "
            "--model resnet50 --data /data/imagenet\n",
            "train.py takes --devices, which torchvision's classification reference does not",
        ),
        (  # OpenCLIP: said nothing at all
            "torchrun --nproc-per-node=gpu -m training.main --model ViT-B-32 --train-data /data/laion "
            "--batch-size 320 --precision amp --epochs 32\n",
            "training.main takes --train-data, which torchvision's classification reference does not",
        ),
        (
            "python main.py -a resnet50 -b 256 --epochs 90 --max-steps 100 /data/imagenet\n",
            "main.py takes --max-steps, which PyTorch's ImageNet example does not",
        ),
    ],
)
def test_a_command_with_a_sizing_flag_its_convention_lacks_is_not_read_as_it(
    tmp_path: Path, command: str, said: str
) -> None:
    refused = _refusal(tmp_path, command)
    assert refused == (
        f"{tmp_path / 'job.sh'}:3: {said}: the advisor reads that program by its flags; say what this one "
        "trains with #ADVISOR lines (--model, --global-batch, and --steps or --epochs)"
    )


def test_flags_it_shares_or_abbreviates_or_that_size_nothing_keep_the_reading(tmp_path: Path) -> None:
    """A fork's --prune sizes nothing; --batch is argparse's abbreviation of --batch-size; timm's --dataset
    names its data under --data-dir's root; a command whose first guess (timm, by --opt) has a flag only
    torchvision's defines is torchvision's."""
    script = tmp_path / "job.sh"
    lines = {
        "fork": "torchrun train.py --model resnet50 --batch 64 --prune --data-path /imagenet\n",
        "pets": "torchrun --nproc_per_node=2 train.py --dataset torch/oxford_iiit_pet --data-dir /scratch "
        "--model convnext_tiny -b 64 --epochs 30\n",
        "tv": "torchrun train.py --model resnet50 --opt adamw --use-v2 --data-path /imagenet\n",
    }
    found = {}
    for name, line in lines.items():
        script.write_text("#!/bin/bash\n#SBATCH --gres=gpu:8\n" + line, encoding="utf-8")
        found[name] = parse_submission(script, [], {})
    fork = found["fork"].description
    assert fork is not None and (fork.global_batch, fork.dataset_size) == (512, 1281167)  # 64 x 8 GPUs
    assert found["pets"].undescribed is not None and '"torch/oxford_iiit_pet"' in found["pets"].undescribed
    assert found["tv"].inferred_from is not None and "(torchvision)" in found["tv"].inferred_from


@pytest.mark.parametrize("style", sorted(CONVENTIONS))
def test_each_convention_defines_the_flags_it_reads(style: str) -> None:
    convention = CONVENTIONS[style]
    read = {*convention.model, *convention.batch, *convention.epochs, *convention.accumulation}
    read |= {*convention.amp, *convention.data, *convention.side}
    assert read <= convention.flags


@pytest.mark.parametrize(
    ("command", "program"),
    [
        ("fairseq-train --fp16 data-bin/wikitext-103 --task masked_lm --arch roberta_base --max-update 9\n",
         "fairseq-train"),
        ("bash ./tools/dist_train.sh configs/resnet/resnet50_8xb32_in1k.py 8\n", "dist_train.sh"),
    ],
)  # fmt: skip
def test_a_training_program_that_is_not_a_python_file_is_named(
    tmp_path: Path, command: str, program: str
) -> None:
    """fairseq's and OpenMMLab's launchers said nothing at all; fairseq's --arch is not the ImageNet
    example's."""
    refused = _refusal(tmp_path, command)
    assert refused is not None and refused.startswith(
        f"{tmp_path / 'job.sh'}:3: {program} takes flags the advisor does not read (it reads PyTorch's"
    )
