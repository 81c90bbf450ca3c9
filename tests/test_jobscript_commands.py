"""Job descriptions read from the training command line, as users write their scripts: four conventions,
launchers, line continuations, variables, comments; what the script computes at run time is not guessed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from advisor.jobscript.commands import CommandReading
from advisor.jobscript.datasets import DatasetsFileError, load_datasets, shipped_datasets
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.launchers import program_of
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


TIMM_LAUNCHER = """#!/bin/bash
#SBATCH --gres=gpu:8
# timm's README: its launcher runs train.py under torchrun in as many processes as its first word
{launch} 8 /data/imagenet --model efficientnet_b2 -b 128 --sched step --epochs 450 --amp --lr .016
"""


@pytest.mark.parametrize(
    "launch", ["./distributed_train.sh", "bash distributed_train.sh", "sh ./distributed_train.sh"]
)
def test_timms_launcher_is_its_train_py_in_as_many_processes(tmp_path: Path, launch: str) -> None:
    """``./distributed_train.sh 8 ...`` (``torchrun --nproc_per_node=$1 train.py "$@"``) said nothing at all:
    no description and no reason."""
    description, source = _parsed(tmp_path, TIMM_LAUNCHER.format(launch=launch))
    expected = {"model": "timm:efficientnet_b2", "global_batch": 8 * 128, "epochs": 450, "own_amp": True}
    assert {key: description[key] for key in expected} == expected
    assert source is not None and source.startswith(f"{tmp_path / 'job.sh'}:4 (timm): {launch} 8 ")


def test_timm_trains_at_its_models_own_input_size_unless_img_size_says(tmp_path: Path) -> None:
    """timm's train.py resizes any dataset to the model's pretrained input size (its data config), not
    ImageNet's 224: efficientnet_b2 at 256 (1.3 times the work a step of 224), CIFAR-10 at 224 for
    efficientnet_b0, not 32; ``--img-size`` wins."""
    description, _ = _parsed(tmp_path, TIMM_LAUNCHER.format(launch="./distributed_train.sh"))
    assert description["input_shape"] == (3, 256, 256)
    sized = TIMM_LAUNCHER.format(launch="./distributed_train.sh").replace("--amp", "--amp --img-size 300")
    assert _parsed(tmp_path, sized)[0]["input_shape"] == (3, 300, 300)
    bare = sized.replace("--img-size 300", "--img-size")  # a flag with no value: the model's own
    assert _parsed(tmp_path, bare)[0]["input_shape"] == (3, 256, 256)
    shaped = sized.replace("--img-size 300", "--input-size 3 320 320")  # timm's C H W
    assert _parsed(tmp_path, shaped)[0]["input_shape"] == (3, 320, 320)
    assert _parsed(tmp_path, shaped)[0]["epochs"] == 450 and "/data/imagenet" in shaped
    cifar, _ = _parsed(tmp_path, TIMM)
    assert cifar["input_shape"] == (3, 224, 224) and cifar["model_kwargs"] == {"num_classes": 10}
    torchvision, _ = _parsed(tmp_path, TORCHVISION.replace("resnet50", "efficientnet_b2"))
    assert torchvision["input_shape"] == (3, 224, 224), "torchvision's reference: its crop size, 224"


def test_torchvisions_reference_trains_at_its_crop_size_with_the_optimizer_it_names(tmp_path: Path) -> None:
    """Its ViT and EfficientNet recipes: ``--opt adamw``, ``--train-crop-size 384`` over ImageNet's 224."""
    description, _ = _parsed(tmp_path, TORCHVISION)
    assert description["optimizer"] == "sgd" and description["input_shape"] == (3, 224, 224), "its defaults"
    recipe = TORCHVISION.replace("--amp", "--amp --opt adamw --train-crop-size 384")
    description, _ = _parsed(tmp_path, recipe)
    assert description["optimizer"] == "adamw" and description["input_shape"] == (3, 384, 384)
    assert description["model"] == "resnet50", "torchvision's, though timm has an --opt too"
    imagenet, _ = _parsed(tmp_path, IMAGENET)
    assert imagenet["optimizer"] == "sgd", "PyTorch's ImageNet example trains with SGD alone"


def test_a_training_command_not_read_says_why_and_names_the_last_such_program(tmp_path: Path) -> None:
    """A program of the user's own (``train.py --cfg exp.yaml --bs 12``, a convention the advisor does not
    read) said nothing at all: no description and no word why; nor did a batch set only when the job runs."""
    text = (
        "#!/bin/bash\n#SBATCH --gres=gpu:8\npython prepare.py\n"
        "torchrun --standalone --nproc_per_node=8 train.py --cfg exp.yaml --bs 12\n"
    )
    parsed = parse_job(text.encode(), "job.sh", ["job.sh"], {})
    assert parsed.description is None and parsed.undescribed is not None
    assert parsed.undescribed.startswith("job.sh:4: train.py takes flags the advisor does not read"), (
        parsed.undescribed
    )
    assert "#ADVISOR lines (--model, --global-batch" in parsed.undescribed
    at_run_time = TORCHVISION.replace("BS=64   # per GPU", "BS=$(cat batch.txt)")
    parsed = parse_job(at_run_time.encode(), "job.sh", ["job.sh"], {})
    assert parsed.description is None and parsed.undescribed is not None
    assert "set only when it runs (the ? in: torchrun" in parsed.undescribed, parsed.undescribed
    described = TORCHVISION.replace("# torchvision's", "python prepare.py\n# torchvision's")
    assert parse_job(described.encode(), "job.sh", ["job.sh"], {}).undescribed is None


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


@pytest.mark.parametrize(
    ("text", "amp", "accumulation"),
    [
        (IMAGENET, False, 1),
        (TORCHVISION, True, 1),
        (TIMM, True, 2),
        (HF, True, 4),
        (HF.replace("--fp16", "--bf16 True"), True, 4),
        (HF.replace("--fp16", "--fp16 False"), False, 4),
        (TIMM.replace("train.py /data/cifar10", "train.py").replace("--amp", "--amp /data/cifar10"), True, 2),
    ],
    ids=["imagenet", "torchvision", "timm", "hf", "hf-bf16-true", "hf-fp16-false", "switch-before-data"],
)
def test_the_scripts_own_precision_and_accumulation_are_read(
    tmp_path: Path, text: str, amp: bool, accumulation: int
) -> None:
    """What the job runs in, so that it is predicted as it runs: a switch takes no value but a boolean."""
    description, _ = _parsed(tmp_path, text)
    assert (description["own_amp"], description["own_accumulation"]) == (amp, accumulation)
    assert description["dataset_size"] == 50000 or "cifar10" not in text


def test_a_sites_datasets_table_is_read_over_the_shipped_one(tmp_path: Path) -> None:
    table = tmp_path / "datasets.toml"
    table.write_text("[inat2021]\nsamples = 2686843\nclasses = 10000\nside = 224\n\n[cifar10]\n"
                     "samples = 45000\nclasses = 10\nside = 32\n")  # fmt: skip
    site = load_datasets(table)
    assert site["inat2021"].samples == 2686843 and site["cifar10"].samples == 45000, "the site's entry wins"
    assert site["imagenet"] == shipped_datasets()["imagenet"], "the shipped entries stay"
    text = TORCHVISION.replace("/datasets/imagenet", "/datasets/iNat2021/train")
    script = tmp_path / "job.sh"
    assert parse_job(text.encode(), str(script), [str(script)], {}).description is None
    parsed = parse_job(text.encode(), str(script), [str(script)], {}, (), CommandReading(site))
    assert parsed.description is not None and parsed.description.dataset_size == 2686843
    assert parsed.description.model_kwargs == {"num_classes": 10000}
    table.write_text("[inat2021]\nsamples = 2686843\nclasses = 0\nside = 224\n")
    with pytest.raises(DatasetsFileError, match=rf"{table}:3: inat2021.classes: "):
        load_datasets(table)
    table.write_text('["Bad Name"]\nsamples = 1\nclasses = 1\nside = 1\n')
    with pytest.raises(DatasetsFileError, match=rf"{table}:1: Bad Name: .*pattern"):
        load_datasets(table)


def test_advisor_parse_reads_the_datasets_the_settings_name(tmp_path: Path) -> None:
    (tmp_path / "datasets.toml").write_text("[inat2021]\nsamples = 2686843\nclasses = 10000\nside = 224\n")
    (tmp_path / "advisor.toml").write_text(f'datasets = "{tmp_path / "datasets.toml"}"\n')
    script = tmp_path / "train.sh"
    script.write_text(TORCHVISION.replace("/datasets/imagenet", "/datasets/inat2021"))
    config = ["--config", str(tmp_path / "advisor.toml")]
    command = [str(BIN / "advisor"), *config, "parse", str(script), "--json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["description"]["dataset_size"] == 2686843
    (tmp_path / "datasets.toml").write_text("[inat2021]\nsamples = -1\nclasses = 1\nside = 1\n")
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and f"{tmp_path / 'datasets.toml'}:2: inat2021.samples" in result.stderr
    assert "Traceback" not in result.stderr


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


DEIT = """#!/bin/bash
#SBATCH --gres=gpu:8
python -m torch.distributed.launch --nproc_per_node=8 --use_env main.py --model deit_small_patch16_224 \\
    --batch-size 128 --data-path /datasets/imagenet --output_dir /checkpoint/deit
"""


def test_deits_main_py_is_timms_model_at_its_own_defaults(tmp_path: Path) -> None:
    """DeiT's README command: 300 epochs, AdamW, autocast always (its engine's); it was read as
    torchvision's reference (90 epochs, SGD, fp32, a model torchvision does not have). ConvNeXt's main.py
    (``--update_freq``) trains in fp32 unless ``--use_amp true``."""
    description, source = _parsed(tmp_path, DEIT)
    expected = {
        "model": "timm:deit_small_patch16_224", "global_batch": 1024, "epochs": 300, "own_amp": True,
        "optimizer": "adamw", "input_shape": (3, 224, 224),
    }  # fmt: skip
    assert {key: description[key] for key in expected} == expected
    assert source is not None and " (deit): python -m torch.distributed.launch " in source
    convnext = DEIT.replace("deit_small_patch16_224", "convnext_tiny").replace(
        "--output_dir", "--update_freq 4 --output_dir"
    )
    described, _ = _parsed(tmp_path, convnext)
    assert (described["global_batch"], described["own_accumulation"], described["own_amp"]) == (
        4096,
        4,
        False,
    )
    amp = convnext.replace("--update_freq 4", "--update_freq 4 --use_amp true")
    assert _parsed(tmp_path, amp)[0]["own_amp"] is True


@pytest.mark.parametrize(
    "launch",
    ["fabric run --accelerator=cuda --devices=4 --num_nodes 2 --precision=bf16-mixed",
     "lightning run model --devices 4 --num-nodes=2", "fabric run model --devices=4 --num_nodes=2"],
)  # fmt: skip
def test_lightning_fabrics_launcher_starts_its_script_on_devices_times_nodes(launch: str) -> None:
    """``fabric run train.py ...`` (its launcher, Fabric 2.x; ``lightning run model`` before) said nothing at
    all; its script is the program, in 4 x 2 processes, and a script of the user's own says why not read."""
    words = [*launch.split(), "train.py", "--cfg", "exp.yaml", "--bs", "12"]
    found = program_of(words)
    assert found is not None
    assert (found.program, found.arguments) == ("train.py", ["--cfg", "exp.yaml", "--bs", "12"])
    assert (found.launcher["nproc-per-node"], found.launcher["nnodes"]) == ("4", "2")
    text = f"#!/bin/bash\n#SBATCH --nodes=2 --gres=gpu:4\nsrun {' '.join(words)}\n"
    parsed = parse_job(text.encode(), "job.sh", ["job.sh"], {})
    assert parsed.description is None and parsed.undescribed is not None
    assert parsed.undescribed.startswith("job.sh:3: train.py takes flags the advisor does not read")
