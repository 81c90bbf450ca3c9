"""The image programs' conventions (PyTorch's ImageNet example, torchvision's classification reference,
timm's train.py, DeiT's, ConvNeXt's and MAE's main.py): which flags hold the model, the batch, the epochs,
the accumulation, the precision, the data and the input side, and what each program assumes where a flag
is absent."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from advisor.introspect.hub import timm_input_side
from advisor.jobscript import image_flags
from advisor.jobscript.datasets import Dataset, dataset_in
from advisor.jobscript.launchers import UNKNOWN, AtRunTime
from advisor.jobscript.trainers import FOLLOWS_ITS_OWN, Undescribed, optimizer_named

_TORCHVISION_NAME = re.compile(r"[a-z][a-z0-9_]*")
OTHER_TASKS = {
    "detection": ("fasterrcnn_", "fcos_", "keypointrcnn_", "maskrcnn_", "retinanet_", "ssd300_", "ssdlite"),
    "segmentation": ("deeplabv3_", "fcn_", "lraspp_"),
    "video": ("mc3_", "mvit_", "r2plus1d_", "r3d_", "s3d", "swin3d_"),
    "optical flow": ("raft_",),
}
"""torchvision's models of other tasks than classification, by their names' beginnings (its detection,
segmentation, video and optical-flow references are each a train.py that takes ``--model``)."""


@dataclass(frozen=True)
class _Convention:
    """The flags of each part, and what its program assumes where a flag is absent."""

    title: str
    flags: frozenset[str]
    """Every flag its program defines (`image_flags`)."""
    model: tuple[str, ...]
    batch: tuple[str, ...]
    epochs: tuple[str, ...]
    defaults: dict[str, str]
    accumulation: tuple[str, ...] = ()
    amp: tuple[str, ...] = ()
    """Switches that turn mixed precision on."""
    steps: tuple[str, ...] = ()
    data: tuple[str, ...] = ()
    per_node: bool = False
    """The batch is for all GPUs of a node (PyTorch's ImageNet example), not per device."""
    side: tuple[str, ...] = ()
    """The input side the program trains at, over the dataset's."""
    timm: bool = False
    """Its models are timm's."""
    autocast: bool = False
    """It trains in mixed precision with no switch (DeiT's and MAE's engines), but where ``--update_freq``
    says ConvNeXt's, whose ``--use_amp`` is off unless given."""


CONVENTIONS = {
    "imagenet": _Convention(
        "PyTorch's ImageNet example", image_flags.IMAGENET, ("a", "arch"), ("b", "batch-size"), ("epochs",),
        {"model": "resnet18", "batch": "256", "epochs": "90"}, per_node=True,
    ),
    "torchvision": _Convention(
        "torchvision's classification reference", image_flags.TORCHVISION,
        ("model",), ("b", "batch-size"), ("epochs",), {"batch": "32", "epochs": "90"}, amp=("amp",),
        data=("data-path",), side=("train-crop-size",),
    ),
    "timm": _Convention(
        "timm's train.py", image_flags.TIMM,
        ("model",), ("b", "batch-size"), ("epochs",), {"batch": "128", "epochs": "300"},
        accumulation=("grad-accum-steps",), amp=("amp",), data=("data-dir",), side=("img-size", "input-size"),
        timm=True,
    ),
    "deit": _Convention(  # DeiT's, ConvNeXt's and MAE's main.py: timm's models, their own flags
        "DeiT's, ConvNeXt's and MAE's main.py", image_flags.DEIT,
        ("model",), ("batch-size",), ("epochs",), {"batch": "64", "epochs": "300", "opt": "adamw"},
        accumulation=("update-freq", "accum-iter"), amp=("use-amp",), data=("data-path",),
        side=("input-size",), timm=True, autocast=True,
    ),
}  # fmt: skip
DEIT_PROGRAMS = frozenset({"main.py", "main_finetune.py", "main_pretrain.py"})
"""facebookresearch's timm-based trainers (DeiT, ConvNeXt, MAE), told from torchvision's train.py."""


_SIZING = (
    *("batch", "epoch", "step", "iter", "accum", "precision", "f16", "amp", "devices", "gpus", "nodes"),
    *("size", "len", "model", "arch", "data", "samples", "classes"),
)


def _spelled_out(convention: _Convention, flags: Mapping[str, str]) -> dict[str, str]:
    """Flags by their full names where abbreviated as argparse takes them: ``--batch 64`` is
    ``--batch-size 64``, a prefix of one flag only."""
    spelled = {}
    for name, value in flags.items():
        matches = [flag for flag in convention.flags if flag.startswith(name)]
        spelled[matches[0] if name not in convention.flags and len(matches) == 1 else name] = value
    return spelled


def foreign_flag(convention: _Convention, flags: Mapping[str, str]) -> str | None:
    """A flag that sizes the job (its batch, length, data, model, devices, precision) and that the
    program does not define, nor abbreviate as argparse lets a flag be: the command is another program's."""
    for name in flags:
        known = any(flag.startswith(name) for flag in convention.flags)
        if not known and any(word in name.lower() for word in _SIZING):
            return name
    return None


def refuse_foreign(program: str, convention: _Convention, flags: Mapping[str, str]) -> None:
    """`Undescribed` for a command that shares a convention's flags but has one of its own that sizes the
    job: none of that program's defaults is assumed (a Lightning script's --max_epochs 20 was 90 epochs)."""
    if not convention.timm:  # what the model is says more than a flag
        _refuse_other_task(next((flags[name] for name in convention.model if flags.get(name)), ""))
    flag = foreign_flag(convention, flags)
    if flag is not None:
        raise Undescribed(
            f"{program} takes --{flag}, which {convention.title} does not: the advisor reads that program "
            "by its flags; say what this one trains with #ADVISOR lines (--model, --global-batch, and "
            "--steps or --epochs)"
        )


def read_images(
    convention: _Convention,
    flags: Mapping[str, str],
    positional: Sequence[str],
    scale: int,
    datasets: Mapping[str, Dataset],
) -> dict[str, Any] | None:
    """The image conventions; ``scale`` is what the batch flag is multiplied by (devices, or nodes)."""
    flags = _spelled_out(convention, flags)

    def value(part: str) -> str | None:
        names: tuple[str, ...] = getattr(convention, part)
        for name in names:
            if name in flags:
                found = flags[name]
                if UNKNOWN in found:
                    raise AtRunTime(name)
                return found
        return convention.defaults.get(part)

    model, batch, epochs, steps = value("model"), value("batch"), value("epochs"), value("steps")
    accumulation, side = value("accumulation") or "1", value("side")
    amp = [flags[name] for name in convention.amp if name in flags]
    if any(UNKNOWN in switch for switch in amp):
        raise AtRunTime("amp")
    dataset = dataset_in(data_words(convention, flags, positional), datasets)
    global_batch = _product(batch, accumulation, str(scale))
    if model is None or not _TORCHVISION_NAME.fullmatch(model.split(".", 1)[0]) or global_batch is None:
        return None
    values: dict[str, Any] = {"model": model, "global_batch": str(global_batch)}
    if convention.timm:  # timm's own model, whatever torchvision calls the same name
        values["model"] = f"timm:{model}"
    elif "." in model:
        return None
    else:
        _refuse_other_task(model)
    optimizer = optimizer_named(flags.get("opt", convention.defaults.get("opt", "sgd")))  # the example's SGD
    values |= {} if optimizer is None else {"optimizer": optimizer}
    if steps and steps not in ("-1", "0"):
        values["steps"] = steps
    elif epochs:  # over data the table lacks, without its size (`Inferred.lacking`)
        values |= {"epochs": epochs} | ({} if dataset is None else {"dataset_size": str(dataset.samples)})
    else:
        return None
    if dataset is not None and dataset.side is not None and dataset.classes is not None:
        values["input_shape"] = ["3", str(dataset.side), str(dataset.side)]
        values["model_kwargs"] = {"num_classes": dataset.classes}
    trained_at = _side(convention, model, side)
    values |= {} if trained_at is None else {"input_shape": ["3", trained_at, trained_at]}
    # The script follows its own flags, not the advice's variables: its precision and batch stay.
    own = {"own_amp": _own_amp(convention, flags, amp), "own_accumulation": accumulation}
    return values | own | FOLLOWS_ITS_OWN


def _refuse_other_task(model: str) -> None:
    """`Undescribed` for a torchvision model of another task: its images' sizes and its heads' work are
    not a classifier's at the dataset's side, which is what the advisor would predict."""
    task = next((task for task, starts in OTHER_TASKS.items() if model.startswith(starts)), None)
    if task is not None:
        raise Undescribed(
            f"{model} is a {task} model (torchvision's {task} reference), which the advisor does not "
            "predict: it predicts image classification at a fixed input size and language models"
        )


def data_words(convention: _Convention, flags: Mapping[str, str], positional: Sequence[str]) -> list[str]:
    """What names the data: timm's ``--dataset`` (``torch/oxford_iiit_pet``, under ``--data-dir``'s root)
    or DeiT's ``--data-set``, the data flag, else the program's arguments; not every flag (``--weights
    ResNet50_Weights.IMAGENET1K_V2`` names the weights' data, not the data a fine-tuning job trains on)."""
    named = [flags[name] for name in ("dataset", "data-set", *convention.data) if flags.get(name)]
    return [*named, *positional]


def _side(convention: _Convention, model: str, given: str | None) -> str | None:
    """The side the program trains at where it says one (``--input-size``'s C H W: its width); timm's
    where it does not, its model's own; None: the dataset's."""
    if not given and convention.timm:
        given = str(timm_input_side(model) or "")
    words = (given or "").split()
    return words[-1] if words and words[-1].isdigit() else None


def _own_amp(convention: _Convention, flags: Mapping[str, str], switches: Sequence[str]) -> bool:
    """Mixed precision as its switch says; with none, on for a program that always autocasts (not
    ConvNeXt's, told by its ``--update_freq``)."""
    if not switches and convention.autocast:
        return "update-freq" not in flags
    return any(switch.lower() not in ("false", "0", "no") for switch in switches)


def _product(*factors: str | None) -> int | None:
    result = 1
    for factor in factors:
        if factor is None or not factor.isdigit() or int(factor) < 1:
            return None
        result *= int(factor)
    return result
