"""FSDP read as the ZeRO stage that shards the same state, so its memory is predicted per GPU: from
accelerate's ``fsdp_config`` and from Hugging Face Trainer's ``--fsdp``."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_jobscript_trainers import HEADER, RECIPE, parsed_in

ACCELERATE = "distributed_type: FSDP\n{config}mixed_precision: bf16\nnum_machines: 1\nnum_processes: 2\n"


@pytest.mark.parametrize(
    ("config", "stage"),
    [
        ("fsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n", 3),
        ("fsdp_config:\n  fsdp_sharding_strategy: 1\n", 3),  # accelerate's numbers: 1 is FULL_SHARD
        ("fsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n", 2),
        ("fsdp_config:\n  fsdp_sharding_strategy: NO_SHARD\n", 0),
        ("fsdp_config:\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n", 3),  # accelerate's default
        ("fsdp_config:\n  fsdp_sharding_strategy: HYBRID_SHARD\n", 3),  # within a node (test_fsdp_hybrid)
    ],
)
def test_accelerates_fsdp_sharding_is_read_as_its_zero_stage(
    config: str, stage: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "recipe.yaml").write_text(RECIPE, encoding="utf-8")
    (tmp_path / "fsdp.yaml").write_text(ACCELERATE.format(config=config), encoding="utf-8")
    script = tmp_path / "sft.sh"
    command = "accelerate launch --config_file fsdp.yaml sft.py --config recipe.yaml\n"
    script.write_text(HEADER.format(gpus=2) + command, encoding="utf-8")
    parsed = parsed_in(tmp_path, script, monkeypatch)
    assert parsed.description is not None and parsed.description.zero_stage == stage
    assert parsed.files_read == ("recipe.yaml", "fsdp.yaml")


@pytest.mark.parametrize(
    ("fsdp", "stage"),
    [('"full_shard auto_wrap"', 3), ("shard_grad_op", 2), ("offload", None), (None, None)],
)
def test_the_trainers_fsdp_flag_is_read_as_its_zero_stage(
    fsdp: str | None, stage: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "clm.sh"
    flag = "" if fsdp is None else f" --fsdp {fsdp}"
    command = (
        "torchrun --nproc_per_node 4 run_clm.py --model_name_or_path gpt2 --dataset_name wikitext"
        f" --per_device_train_batch_size 8 --block_size 1024 --max_steps 100{flag} --output_dir out\n"
    )
    script.write_text(HEADER.format(gpus=4) + command, encoding="utf-8")
    parsed = parsed_in(tmp_path, script, monkeypatch)
    assert parsed.description is not None and parsed.description.zero_stage == stage
