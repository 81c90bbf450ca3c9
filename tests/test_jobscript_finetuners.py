"""The LLM fine-tuning jobs users run through axolotl and torchtune, read from their YAML configs as data: the
global batch and the steps counted by hand as the programs count them, the command line's overrides, LoRA and
QLoRA, and what is said where a config cannot describe the job (before: nothing at all)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.introspect.hub import shipped_architecture
from advisor.jobscript.commands import CommandReading, Grant, infer_description
from advisor.jobscript.datasets import shipped_datasets
from advisor.jobscript.finetuners import TORCHTUNE_MODELS, hub_dataset
from advisor.jobscript.launchers import program_of
from advisor.jobscript.submission import ParsedSubmission, parse_submission

ADVISOR = str(Path(sys.executable).parent / "advisor")
HEADER = "#!/bin/bash\n#SBATCH -p a100 --gres=gpu:{gpus} -t 12:00:00\n"
ALPACA = 52002
"""tatsu-lab/alpaca's training rows, as the shipped dataset table holds them."""
AXOLOTL = """base_model: meta-llama/Llama-3.2-1B
adapter: lora
lora_r: 32
lora_target_linear: true
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
val_set_size: 0.05
sequence_len: 2048
micro_batch_size: 2
gradient_accumulation_steps: 4
num_epochs: 3
optimizer: paged_adamw_8bit
gradient_checkpointing: true
"""
TORCHTUNE = """model:
  _component_: torchtune.models.llama3_2.lora_llama3_2_1b
  lora_attn_modules: ['q_proj', 'v_proj', 'output_proj']
  apply_lora_to_mlp: True
  lora_rank: 64
tokenizer:
  _component_: torchtune.models.llama3.llama3_tokenizer
  max_seq_len: 2048
dataset:
  _component_: torchtune.datasets.alpaca_dataset
  packed: False
batch_size: 4
gradient_accumulation_steps: 8
epochs: 1
max_steps_per_epoch: null
optimizer:
  _component_: torch.optim.AdamW
dtype: bf16
enable_activation_checkpointing: False
"""


def parsed(
    folder: Path, command: str, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], gpus: int = 1
) -> ParsedSubmission:
    """The job ``command`` in ``folder``, its working directory, beside ``files`` (name: text)."""
    monkeypatch.chdir(folder)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    script = folder / "job.sh"
    script.write_text(HEADER.format(gpus=gpus) + command + "\n", encoding="utf-8")
    return parse_submission(script, [], {})


def at_command(folder: Path) -> str:
    """Where `parsed`'s reasons begin: the script's path and its command's line."""
    return f"{folder / 'job.sh'}:3: "


@pytest.mark.parametrize(
    ("command", "processes"),
    [
        ("accelerate launch --num_processes 2 -m axolotl.cli.train config.yml", 2),
        ("axolotl train config.yml", 4),
        ("python -m axolotl.cli.train config.yml", 4),
        ("accelerate launch scripts/finetune.py config.yml", 4),
    ],
)
def test_an_axolotl_lora_job_is_read_from_its_config_under_each_launcher(
    command: str, processes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2 per process x 4 accumulated x the processes (accelerate's, else the job's 4 GPUs); 3 epochs of
    alpaca less the 5% axolotl holds out for evaluation (2,601 rows, 5% rounded up as ``train_test_split``
    does); bf16 by axolotl's default ``auto``."""
    found = parsed(tmp_path, command, monkeypatch, {"config.yml": AXOLOTL}, gpus=4)
    assert found.description is not None and found.undescribed is None
    described = found.description
    assert described.model == "hf:meta-llama/Llama-3.2-1B" and described.global_batch == 2 * 4 * processes
    assert (described.epochs, described.dataset_size) == (3, ALPACA - 2601)
    assert described.total_steps == 3 * math.ceil((ALPACA - 2601) / (8 * processes))
    assert (described.sequence_length, described.own_accumulation, described.own_amp) == (2048, 4, True)
    assert (described.lora_rank, described.lora_targets) == (32, ("all-linear",))
    assert described.gradient_checkpointing and described.optimizer == "adamw"
    assert not described.follows_advice and found.files_read == ("config.yml",)


def test_a_qlora_config_with_named_targets_and_max_steps_and_the_command_line_over_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = AXOLOTL.replace("adapter: lora", "adapter: qlora\nload_in_4bit: true").replace(
        "lora_target_linear: true",
        "lora_target_modules:\n  - q_proj\n  - v_proj\nmax_steps: 500\nbf16: false",
    )
    command = "axolotl train config.yml --micro-batch-size 8 --gradient_checkpointing false"
    described = parsed(tmp_path, command, monkeypatch, {"config.yml": config}).description
    assert described is not None
    assert (described.global_batch, described.steps, described.epochs) == (8 * 4, 500, None)
    assert (described.lora_rank, described.lora_targets) == (32, ("q_proj", "v_proj"))
    assert not described.gradient_checkpointing and not described.own_amp


def test_packed_samples_without_the_datasets_tokens_say_why_and_the_named_remedy_completes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {"config.yml": AXOLOTL + "sample_packing: true\n"}
    found = parsed(tmp_path, "axolotl train config.yml", monkeypatch, files)
    assert found.description is None and found.undescribed == at_command(tmp_path) + (
        'axolotl trains hf:meta-llama/Llama-3.2-1B for 3 epochs of "tatsu-lab/alpaca" packed into sequences '
        'of 2048 tokens, and the advisor does not know its tokens: add "#ADVISOR --dataset-size N" (the '
        "packed sequences of an epoch) or set max_steps in config.yml"
    )
    completed = parsed(tmp_path, "#ADVISOR --dataset-size=9000\naxolotl train config.yml", monkeypatch, files)
    assert completed.description is not None and completed.description.total_steps == 3 * math.ceil(9000 / 8)


def test_packed_samples_of_a_corpus_with_known_tokens_are_its_tokens_over_the_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wikitext-2's 2,373,632 tokens in sequences of 1,024: 2,318 a full epoch (no evaluation held out)."""
    config = AXOLOTL.replace("tatsu-lab/alpaca", "Salesforce/wikitext\n    name: wikitext-2-raw-v1")
    config = config.replace("val_set_size: 0.05", "")
    config = config.replace("sequence_len: 2048", "sequence_len: 1024") + "sample_packing: true\n"
    described = parsed(tmp_path, "axolotl train config.yml", monkeypatch, {"config.yml": config}).description
    assert described is not None and described.dataset_size == 2373632 // 1024 == 2318


def test_a_dataset_the_table_lacks_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = AXOLOTL.replace("tatsu-lab/alpaca", "/data/my_chats.jsonl")
    found = parsed(tmp_path, "axolotl train config.yml", monkeypatch, {"config.yml": config})
    assert found.undescribed == at_command(tmp_path) + (
        'axolotl trains hf:meta-llama/Llama-3.2-1B for 3 epochs of "/data/my_chats.jsonl", a dataset the '
        'advisor does not know: add "#ADVISOR --dataset-size N" (its training samples) or set max_steps in '
        "config.yml"
    )


@pytest.mark.parametrize(
    ("path", "configuration", "samples"),
    [
        ("tatsu-lab/alpaca", None, ALPACA),
        ("mhenrichsen/alpaca_2k_test", None, None),  # axolotl's examples' 2,000 rows, not alpaca's 52,002
        ("yahma/alpaca-cleaned", None, None),  # torchtune's default: another set
        ("wmt16", "ro-en", 610320),
        ("Salesforce/wikitext", "wikitext-2-raw-v1", 36718),
        ("ccdv/cnn_dailymail", "3.0.0", 287113),
    ],
)
def test_a_hub_dataset_is_the_table_entry_its_name_is_not_one_it_contains(
    path: str, configuration: str | None, samples: int | None
) -> None:
    found = hub_dataset(path, configuration, shipped_datasets())
    assert (found.samples if found is not None else None) == samples


def test_deepspeed_and_fsdp_named_by_the_config_and_a_file_that_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "config.yml": AXOLOTL + "deepspeed: zero3.json\n",
        "zero3.json": '{"zero_optimization": {"stage": 3}}',
    }
    found = parsed(tmp_path, "axolotl train config.yml", monkeypatch, files)
    assert found.description is not None and found.description.zero_stage == 3
    assert found.files_read == ("config.yml", "zero3.json")
    files = {"config.yml": AXOLOTL + "deepspeed: missing.json\n"}
    found = parsed(tmp_path, "axolotl train config.yml", monkeypatch, files)
    assert found.description is not None and found.description.zero_stage is None
    assert (found.files_read, found.files_unread) == (("config.yml",), ("missing.json",))
    for fsdp, stage in (
        ("fsdp:\n  - full_shard\n  - auto_wrap\n", 3),
        ("fsdp_version: 2\nfsdp_config:\n  reshard_after_forward: false\n", 2),
    ):
        found = parsed(tmp_path, "axolotl train config.yml", monkeypatch, {"config.yml": AXOLOTL + fsdp})
        assert found.description is not None and found.description.zero_stage == stage


def test_an_axolotl_config_that_cannot_be_read_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = parsed(tmp_path, "axolotl train absent.yml", monkeypatch, {})
    assert found.description is None and found.undescribed == at_command(tmp_path) + (
        "axolotl's config absent.yml could not be read: the job's model, batch and length are in it"
    )
    daemon = CommandReading(shipped_datasets())  # as the daemon reads a script: no user's file
    inferred = infer_description("axolotl train config.yml\n", "job.sh", Grant(1, 1), daemon)
    assert inferred is not None and inferred.lacking == (
        "axolotl's config config.yml (the advisor's daemon reads no user's file) could not be read: the "
        "job's model, batch and length are in it"
    )


def test_a_torchtune_recipe_reads_its_config_with_the_overrides_over_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """batch_size=8 and epochs=2 win over the file's 4 and 1. Per epoch: alpaca's rows over 4 processes
    (13,001 each), 1,625 whole batches of 8, 203 whole accumulations of 8; global 8 x 8 x 4."""
    command = "tune run --nproc_per_node 4 lora_finetune_distributed --config tune.yaml batch_size=8 epochs=2"
    found = parsed(tmp_path, command, monkeypatch, {"tune.yaml": TORCHTUNE}, gpus=4)
    described = found.description
    assert described is not None and found.files_read == ("tune.yaml",)
    assert (described.global_batch, described.steps) == (8 * 8 * 4, 2 * (math.ceil(ALPACA / 4) // 8 // 8))
    assert described.steps == 406 and described.model == "hf:meta-llama/Llama-3.2-1B"
    assert (described.lora_rank, described.sequence_length, described.zero_stage) == (64, 2048, 3)
    assert described.lora_targets == ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    assert described.own_amp and described.optimizer == "adamw" and not described.gradient_checkpointing


def test_a_full_fine_tune_of_another_family_and_a_held_out_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Qwen2.5 0.5B trained whole by torchtune on samsum (14,732 rows): 14,732 // 4 // 8 = 460 steps;
    axolotl's ``val_set_size: 500`` holds out 500 rows."""
    config = TORCHTUNE.replace("llama3_2.lora_llama3_2_1b", "qwen2_5.qwen2_5_0_5b").replace(
        "alpaca_", "samsum_"
    )
    command = "tune run full_finetune_single_device --config tune.yaml"
    described = parsed(tmp_path, command, monkeypatch, {"tune.yaml": config}).description
    assert described is not None and described.model == "hf:Qwen/Qwen2.5-0.5B"
    assert (described.steps, described.lora_rank, described.lora_targets) == (14732 // 4 // 8, None, ())
    config = AXOLOTL.replace("val_set_size: 0.05", "val_set_size: 500")
    described = parsed(tmp_path, "axolotl train config.yml", monkeypatch, {"config.yml": config}).description
    assert described is not None and described.dataset_size == ALPACA - 500


def test_max_steps_per_epoch_caps_an_epoch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    command = "tune run full_finetune_single_device --config tune.yaml max_steps_per_epoch=100 epochs=3"
    config = TORCHTUNE.replace("lora_llama3_2_1b", "llama3_2_1b")
    described = parsed(tmp_path, command, monkeypatch, {"tune.yaml": config}).description
    assert described is not None and described.steps == 3 * 100 and described.lora_rank is None
    assert described.zero_stage is None, "a single device shards nothing"


def test_a_config_torchtune_ships_is_named_not_guessed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shipped config is a name torchtune resolves inside its own package: there is no file to read here."""
    reason = (
        "lora_finetune_single_device runs torchtune's own config "
        '"llama3_2/1B_lora_single_device", which the advisor cannot read here: copy it '
        '("tune cp llama3_2/1B_lora_single_device my_config.yaml") and run --config my_config.yaml'
    )
    command = "tune run lora_finetune_single_device --config llama3_2/1B_lora_single_device batch_size=8"
    found = parsed(tmp_path, command, monkeypatch, {})
    assert found.description is None and found.undescribed == at_command(tmp_path) + reason
    shown = subprocess.run(
        [ADVISOR, "parse", str(tmp_path / "job.sh")], capture_output=True, text=True, timeout=60, check=True
    )
    said = f"no job description: {at_command(tmp_path)}{reason}"
    assert "".join(shown.stdout.split()).endswith("".join(said.split())), "the terminal wraps the path itself"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            ("lora_llama3_2_1b", "lora_llama3_2_vision_11b"),
            "lora_finetune_single_device trains torchtune.models.llama3_2.lora_llama3_2_vision_11b, a "
            "torchtune model the advisor does not match to a Hugging Face architecture: describe the job "
            "with #ADVISOR lines (--model hf:NAME --global-batch N --steps N)",
        ),
        (
            ("max_seq_len: 2048", "max_seq_len: null"),
            "lora_finetune_single_device pads each batch to its longest sample (tokenizer.max_seq_len is not "
            "set), a length the advisor cannot know: pass tokenizer.max_seq_len=N",
        ),
        (
            ("packed: False", "packed: True"),
            'lora_finetune_single_device trains hf:meta-llama/Llama-3.2-1B for 1 epoch of "tatsu-lab/alpaca" '
            'packed into sequences of 2048 tokens: add "#ADVISOR --dataset-size N" (the packed sequences of '
            "an epoch) or pass max_steps_per_epoch=N",
        ),
    ],
)
def test_what_a_torchtune_config_does_not_say_is_named(
    change: tuple[str, str], reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = "tune run lora_finetune_single_device --config tune.yaml"
    found = parsed(tmp_path, command, monkeypatch, {"tune.yaml": TORCHTUNE.replace(*change)})
    assert found.description is None and found.undescribed == at_command(tmp_path) + reason


def test_a_value_computed_at_run_time_is_not_guessed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    command = "BS=$(cat bs)\ntune run lora_finetune_single_device --config tune.yaml batch_size=$BS"
    found = parsed(tmp_path, command, monkeypatch, {"tune.yaml": TORCHTUNE})
    assert found.description is None and found.undescribed is not None  # before: not a word said
    assert "is set only when it runs (the ? in: tune run lora_finetune_single_device" in found.undescribed


def test_each_torchtune_model_the_advisor_maps_is_a_shipped_architecture() -> None:
    """The mapping names only architectures the advisor builds without a network (the table's)."""
    assert {
        builder: shipped_architecture(name) is not None for builder, name in TORCHTUNE_MODELS.items()
    } == dict.fromkeys(TORCHTUNE_MODELS, True)


@pytest.mark.parametrize(
    ("line", "program", "arguments", "launcher"),
    [
        ("accelerate launch --num_processes 2 -m axolotl.cli.train c.yml", "axolotl.cli.train", ["c.yml"],
         {"accelerate": "", "num-processes": "2"}),
        ("axolotl train c.yml --micro-batch-size 2", "axolotl train", ["c.yml", "--micro-batch-size", "2"],
         {}),
        ("torchrun --nproc_per_node 8 -m my.train --lr 1", "my.train", ["--lr", "1"],
         {"nproc-per-node": "8"}),
        ("srun -m block:cyclic python -m my.train --lr 1", "my.train", ["--lr", "1"], {"m": "block:cyclic"}),
        ("CUDA_VISIBLE_DEVICES=0,1 env A=1 accelerate launch -m axolotl.cli.train c.yml", "axolotl.cli.train",
         ["c.yml"], {"accelerate": ""}),
        ("tune run --nnodes 2 --nproc_per_node 8 full_finetune_distributed --config c.yaml",
         "tune run full_finetune_distributed", ["--config", "c.yaml"],
         {"nnodes": "2", "nproc-per-node": "8"}),
    ],
)  # fmt: skip
def test_the_fine_tuning_launch_forms_name_their_program(
    line: str, program: str, arguments: list[str], launcher: dict[str, str]
) -> None:
    launch = program_of(line.split())
    assert launch is not None
    assert (launch.program, launch.arguments, launch.launcher) == (program, arguments, launcher)
