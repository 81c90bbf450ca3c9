"""LLaMA-Factory's training (``llamafactory-cli train config.yaml``), its YAML read as data: the global
batch and the epoch counted by hand as LLaMA-Factory counts them, the command line's ``key=value``
overrides, and what is said where it trains in a way the advisor does not predict (before: "nothing read")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from advisor.jobscript.submission import ParsedSubmission, parse_submission

HEADER = "#!/bin/bash\n#SBATCH --gres=gpu:{gpus} -t 08:00:00\n"
CONFIG = """### model
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
trust_remote_code: true
### method
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all
### dataset
dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 2048
max_samples: 1000
### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
bf16: true
"""
"""LLaMA-Factory's examples/train_lora/llama3_lora_sft.yaml, as its README runs it."""


def parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, gpus: int = 1, config: str = CONFIG
) -> ParsedSubmission:
    (tmp_path / "sft.yaml").write_text(config, encoding="utf-8")
    script = tmp_path / "job.sh"
    script.write_text(HEADER.format(gpus=gpus) + command, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return parse_submission(script, [], {})


def described(found: ParsedSubmission) -> dict[str, Any]:
    assert found.description is not None, found.undescribed
    return found.description.model_dump()


def test_its_readme_example_is_described(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """identity's 91 rows and alpaca_en_demo's 999 (each under max_samples 1,000): 1,090 samples an epoch;
    1 a device x 8 accumulated x 1 GPU; LoRA of rank 8 on every linear layer; bf16; checkpointing on, as
    LLaMA-Factory trains unless told not to."""
    found = described(parsed(tmp_path, monkeypatch, "llamafactory-cli train sft.yaml\n"))
    assert {key: found[key] for key in ("model", "task", "sequence_length", "global_batch")} == {
        "model": "hf:meta-llama/Meta-Llama-3-8B-Instruct", "task": "causal-lm", "sequence_length": 2048,
        "global_batch": 8,
    }  # fmt: skip
    assert (found["epochs"], found["dataset_size"], found["lora_rank"], found["lora_targets"]) == (
        3, 1090, 8, ("all-linear",)
    )  # fmt: skip
    assert found["own_amp"] and found["gradient_checkpointing"] and found["own_accumulation"] == 8


def test_overrides_the_gpus_and_a_smaller_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``lmf train`` on 4 GPUs (one process each) with overrides: 2 x 8 x 4 = 64 a step; max_samples 50
    caps both datasets (100 samples); max_steps wins over the epochs."""
    command = "lmf train sft.yaml per_device_train_batch_size=2 max_samples=50\n"
    found = described(parsed(tmp_path, monkeypatch, command, gpus=4))
    assert (found["global_batch"], found["dataset_size"]) == (64, 100)
    stepped = parsed(tmp_path, monkeypatch, command.replace("\n", " max_steps=300\n"), gpus=4)
    assert described(stepped)["steps"] == 300


def test_pretraining_packs_a_corpus_by_its_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stage pt packs: wikitext-2's 2,373,632 tokens over cutoff_len 1,024 are 2,318 sequences; a full
    fine-tune adds no adapters; its DeepSpeed JSON's ZeRO stage is read; ``python src/train.py`` is the
    same program, told by its config's keys."""
    config = CONFIG.replace("stage: sft", "stage: pt").replace(
        "finetuning_type: lora", "finetuning_type: full"
    )
    config = config.replace("identity,alpaca_en_demo", "wikitext-2").replace("max_samples: 1000\n", "")
    config = config.replace("cutoff_len: 2048", "cutoff_len: 1024") + "deepspeed: ds_z3.json\n"
    (tmp_path / "ds_z3.json").write_text('{"zero_optimization": {"stage": 3}}', encoding="utf-8")
    found = described(parsed(tmp_path, monkeypatch, "python src/train.py sft.yaml\n", config=config))
    assert (found["dataset_size"], found["lora_rank"], found["zero_stage"]) == (2318, None, 3)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ("stage: sft", "stage: dpo"),
            "LLaMA-Factory's dpo stage trains on preference pairs",
        ),
        (("stage: sft", "stage: rm"), "LLaMA-Factory's reward stage trains on preference pairs"),
        (
            ("finetuning_type: lora", "finetuning_type: freeze"),
            "LLaMA-Factory's finetuning_type freeze trains part of the model in a way the advisor does not "
            "predict: it predicts full fine-tuning and LoRA",
        ),
        (
            ("identity,alpaca_en_demo", "my_chats"),
            'LLaMA-Factory trains hf:meta-llama/Meta-Llama-3-8B-Instruct for 3 epochs of "my_chats", a '
            'dataset the advisor does not know: add "#ADVISOR --dataset-size N" (its training samples) or '
            "set max_steps in sft.yaml",
        ),
    ],
)
def test_what_it_cannot_describe_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: tuple[str, str], said: str
) -> None:
    found = parsed(tmp_path, monkeypatch, "llamafactory-cli train sft.yaml\n", config=CONFIG.replace(*change))
    assert found.description is None and found.undescribed is not None
    assert found.undescribed.startswith(f"{tmp_path / 'job.sh'}:3: {said}")
