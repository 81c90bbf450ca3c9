"""torchvision's detection, segmentation, video and optical-flow references are each a train.py that takes
``--model``, as its classification reference does: their jobs are refused with why, not predicted as a
classifier at 224 pixels over ImageNet (before: fasterrcnn_resnet50_fpn, 256 a step, 1,281,167 images)."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchvision import models

from advisor.jobscript.image_jobs import OTHER_TASKS
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
