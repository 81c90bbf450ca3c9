"""torchtitan's trainer (``torchrun ... -m torchtitan.train --job.config_file llama3_8b.toml``): its TOML
config, read as a recipe (`advisor.jobscript.recipes`), and ``--section.key`` flags over it.

The model is its ``[model]`` name and flavor where the shipped table has that published model (Llama 3's
8B and 70B); ``[training]``'s ``local_batch_size`` (``batch_size`` before 2025) a GPU, ``seq_len``,
``steps`` and ``gradient_accumulation_steps``; its parameters sharded over the data-parallel GPUs (FSDP2,
``data_parallel_shard_degree``, -1 for all of them) as ZeRO-3 shards them; ``[activation_checkpoint]``;
bfloat16 unless ``mixed_precision_param`` says float32. A model split over GPUs (tensor, pipeline or
context parallel) the advisor does not predict: it says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.jobscript.arguments import counts
from advisor.jobscript.launchers import TORCHTITAN_MODULE
from advisor.jobscript.trainers import FOLLOWS_ITS_OWN, Undescribed, refuse_split

_FLAVORS = {("llama3", "8b"): "meta-llama-3-8b", ("llama3", "70b"): "meta-llama-3-70b"}
"""torchtitan's model flavors that are published models the shipped table holds."""
_SPLITS = ("tensor-parallel-degree", "pipeline-parallel-degree", "context-parallel-degree")


def torchtitan_style(program: str, flags: Mapping[str, str]) -> bool:
    return (
        program == TORCHTITAN_MODULE or program.endswith("torchtitan/train.py") or "job.config-file" in flags
    )


def read_torchtitan(program: str, flags: Mapping[str, str], world: int) -> dict[str, Any] | None:
    """The job's values from its config's and command line's flags (merged); None where one is missing."""
    name, flavor = flags.get("model.name", ""), flags.get("model.flavor", "")
    model = _FLAVORS.get((name.lower(), flavor.lower()))
    if model is None:
        raise Undescribed(
            f"{program} trains {name or 'a model'} {flavor}, a flavor the advisor does not build: describe "
            "the job with #ADVISOR lines (--model hf:NAME --global-batch N --steps N --sequence-length N)"
        )
    split = [_degree(flags.get(f"parallelism.{key}", "1")) for key in _SPLITS]
    refuse_split(program, split)
    batch = flags.get("training.local-batch-size") or flags.get("training.batch-size") or "8"
    length, steps = flags.get("training.seq-len", "2048"), flags.get("training.steps", "10000")
    accumulation = flags.get("training.gradient-accumulation-steps", "1")
    if not counts(batch, length, steps, accumulation):
        return None
    sharded = _degree(flags.get("parallelism.data-parallel-shard-degree", "-1")) != 1
    checkpointing = flags.get("activation-checkpoint.mode", "selective").lower() != "none"
    return (
        {
            "model": f"hf:{model}",
            "task": "causal-lm",
            "sequence_length": length,
            "global_batch": str(int(batch) * int(accumulation) * world),
            "steps": steps,
            "optimizer": "adamw",
            "gradient_checkpointing": checkpointing,
            "own_amp": flags.get("training.mixed-precision-param", "bfloat16") != "float32",
            "own_accumulation": accumulation,
        }
        | FOLLOWS_ITS_OWN
        | ({"zero_stage": 3} if sharded else {})
    )


def _degree(text: str) -> int:
    """A parallelism degree (-1: every GPU left, as sharding's default)."""
    try:
        return int(text)
    except ValueError:
        return 1
