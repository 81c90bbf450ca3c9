"""A training command whose model and batch are read but whose epochs run over data the dataset table does not
know: it describes no job, and every surface says why and what gives its length (before: no word at all, and
the advice said "no #ADVISOR job description"). The datasets added to the table, by hand-counted steps."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from advisor.jobscript.submission import ParsedSubmission, parse_submission
from advisor.policy.load import parse_policy
from advisor.recommend.ask import Ask, Caller
from advisor.recommend.cluster import ClusterView
from advisor.recommend.edges import Sources, recommend_now
from advisor.recommend.estimator import Context
from advisor.recommend.service import recommend
from advisor.slurm.client import SlurmClient
from advisor.store import Store
from advisor.wait.accuracy import WaitEstimate

from .test_recommend_arrays import A100

ADVISOR = str(Path(sys.executable).parent / "advisor")
HEADER = "#!/bin/bash\n#SBATCH -p a100 --gres=gpu:1 -t 10:00:00\n"
TRANSLATION = (
    "python run_translation.py --model_name_or_path google-t5/t5-base --dataset_name {name} \\\n"
    "  --dataset_config_name {config} --per_device_train_batch_size 16 --max_source_length 256 \\\n"
    "  --max_target_length 128 --num_train_epochs 2 --output_dir out\n"
)
WMT19 = (
    'run_translation.py trains hf:google-t5/t5-base for 2 epochs of "wmt19" (de-en), a dataset the advisor '
    'does not know: add "#ADVISOR --dataset-size N" (its training samples) or pass --max_steps'
)


def parsed(tmp_path: Path, body: str, *words: str) -> ParsedSubmission:
    script = tmp_path / "job.sh"
    script.write_text(HEADER + body, encoding="utf-8")
    return parse_submission(script, list(words), {})


def placed(tmp_path: Path, reason: str) -> str:
    """The reason after its place: the script's path and the command's line."""
    return f"{tmp_path / 'job.sh'}:3: {reason}"


def translation(name: str, config: str) -> str:
    return TRANSLATION.format(name=name, config=config)


def test_epochs_over_an_unknown_dataset_describe_no_job_and_say_why(tmp_path: Path) -> None:
    found = parsed(tmp_path, translation("wmt19", "de-en"))
    assert found.description is None and found.inferred_from is None
    assert found.undescribed == placed(tmp_path, WMT19)


def test_its_dataset_size_or_steps_complete_the_command(tmp_path: Path) -> None:
    """What the reason names works: `#ADVISOR --dataset-size` keeps the command's epochs, batch, lengths."""
    sized = parsed(tmp_path, "#ADVISOR --dataset-size=34782245\n" + translation("wmt19", "de-en"))
    assert sized.description is not None and sized.undescribed is None
    assert sized.description.total_steps == 2 * math.ceil(34782245 / 16)
    assert (sized.description.sequence_length, sized.description.target_length) == (256, 128)
    stepped = parsed(
        tmp_path, translation("wmt19", "de-en").replace("--num_train_epochs 2", "--max_steps 500")
    )
    assert stepped.description is not None and stepped.description.steps == 500


def test_advisor_parse_shows_the_reason_under_its_table_and_in_json(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(HEADER + translation("wmt19", "de-en"), encoding="utf-8")
    shown = subprocess.run(
        [ADVISOR, "parse", str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    said = f"no job description: {placed(tmp_path, WMT19)}"
    assert "".join(shown.stdout.split()).endswith("".join(said.split())), "the terminal wraps the path itself"
    dumped = subprocess.run(
        [ADVISOR, "parse", "--json", str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(dumped.stdout)["undescribed"] == placed(tmp_path, WMT19)


def test_the_advice_names_the_reason_instead_of_no_description(tmp_path: Path) -> None:
    found = parsed(tmp_path, translation("wmt19", "de-en"))
    waits = WaitEstimate(slurm_wait_s=0.0, advisor_wait_s=None, preferred="slurm")
    context = Context(parse_policy("", "p.toml"), [A100], lambda queries: [waits] * len(queries))
    ask = Ask(
        found.request, None, Caller("alice"), datetime(2026, 12, 5, tzinfo=UTC), unread=found.undescribed
    )
    advice = recommend(context, ask, None)
    assert advice.reasons == [placed(tmp_path, WMT19)] and advice.candidates == []


def test_the_recommender_on_the_cluster_says_the_reason(local_slurm: SlurmClient, tmp_path: Path) -> None:
    """What `advisor recommend` and the daemon (advise-submit, the cli_filter, the web page) ask: the Ask
    their sources fill carries the parse's reason, said where "no #ADVISOR job description" was."""
    found = parsed(tmp_path, translation("wmt19", "de-en"))
    now = datetime.now(UTC)
    sources = Sources(ClusterView(local_slurm, lambda: now), Store.memory(), parse_policy("", "p.toml"), [])
    advice = recommend_now(sources, found, None, "alice", now)
    assert advice.reasons[0] == placed(tmp_path, WMT19) and not advice.apply, advice.reasons
    assert not any("#ADVISOR job description" in reason for reason in advice.reasons)


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (
            "python train.py --model resnet50 -b 64 --epochs 90 --amp --data-dir /data/inat2021\n",
            'train.py trains timm:resnet50 for 90 epochs of "/data/inat2021", a dataset the advisor does not '
            'know: add "#ADVISOR --dataset-size N" (its training samples)',
        ),
        (
            "python train.py fit --model.backbone=resnet50 --data.batch_size=32 --trainer.max_epochs=10\n",
            'train.py trains resnet50 for 10 epochs of data the command does not name: add "#ADVISOR '
            '--dataset-size N" (its training samples) or pass --trainer.max_steps',
        ),
    ],
)
def test_image_and_lightning_commands_say_it_too(tmp_path: Path, command: str, said: str) -> None:
    assert parsed(tmp_path, command).undescribed == placed(tmp_path, said)


def test_a_later_command_that_says_it_all_is_read_instead(tmp_path: Path) -> None:
    found = parsed(tmp_path, translation("wmt19", "de-en") + translation("wmt16", "ro-en"))
    assert found.description is not None and found.undescribed is None
    assert found.inferred_from is not None and found.inferred_from.startswith(f"{tmp_path / 'job.sh'}:6 ")


def test_wmt16_is_counted_by_its_configuration(tmp_path: Path) -> None:
    """2 epochs of wmt16 ro-en's 610,320 pairs at 16 a step: 38,145 steps each; de-en is another size."""
    romanian = parsed(tmp_path, translation("wmt16", "ro-en")).description
    assert romanian is not None and (romanian.dataset_size, romanian.total_steps) == (610320, 76290)
    german = parsed(tmp_path, translation("wmt/wmt16", "de-en")).description
    assert german is not None and german.dataset_size == 4548885
    bare = parsed(
        tmp_path, TRANSLATION.replace(" \\\n  --dataset_config_name {config}", "").format(name="wmt16")
    )
    assert bare.undescribed is not None and '"wmt16", a dataset' in bare.undescribed


def test_image_datasets_are_matched_as_their_folders_spell_them(tmp_path: Path) -> None:
    """torchvision's reference script on /data/tiny_imagenet: Tiny ImageNet's 100,000 images, 200 classes at
    64 pixels (not ImageNet's), 300 epochs at 128 a step: 782 steps each."""
    command = "python train.py /data/tiny_imagenet --model resnet18 -b 128 --epochs 300\n"
    tiny = parsed(tmp_path, command).description
    assert tiny is not None and tiny.total_steps == 300 * 782
    assert tiny.input_shape == (3, 64, 64) and tiny.model_kwargs == {"num_classes": 200}
    places = parsed(tmp_path, command.replace("tiny_imagenet", "Places365/train")).description
    assert places is not None and (places.dataset_size, places.model_kwargs) == (
        1803460,
        {"num_classes": 365},
    )


def test_a_fine_tuning_jobs_weights_do_not_name_its_data(tmp_path: Path) -> None:
    """ImageNet weights fine-tuned on a folder the table lacks: the folder names the data (before, the
    weights' name did: 10 epochs of ImageNet's 1,281,167 images)."""
    command = (
        "torchrun --nproc_per_node=1 train.py --model resnet50 --weights ResNet50_Weights.IMAGENET1K_V2 "
        "--data-path /data/flowers --epochs 10 -b 32\n"
    )
    found = parsed(tmp_path, command)
    assert found.description is None
    assert found.undescribed is not None and 'of "/data/flowers", a dataset' in found.undescribed
    on_imagenet = parsed(tmp_path, command.replace("/data/flowers", "/data/imagenet")).description
    assert on_imagenet is not None and on_imagenet.dataset_size == 1281167


def test_beans_is_counted(tmp_path: Path) -> None:
    """run_image_classification's README example: 5 epochs of beans' 1,034 images at 32 a step are 33
    steps each (the last one short), 3 labels."""
    command = (
        "python run_image_classification.py --dataset_name beans --model_name_or_path "
        "google/vit-base-patch16-224-in21k --per_device_train_batch_size 32 --num_train_epochs 5 --do_train\n"
    )
    beans = parsed(tmp_path, command).description
    assert beans is not None and (beans.dataset_size, beans.total_steps) == (1034, 5 * 33)
    assert beans.model_kwargs == {"num_labels": 3}
