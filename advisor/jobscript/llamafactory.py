"""LLaMA-Factory's training, its YAML read as data (never imported or run): ``llamafactory-cli train
config.yaml [key=value ...]`` (``lmf train``; the ``key=value`` overrides win, as its OmegaConf merge does)
or its ``src/train.py config.yaml``.

``model_name_or_path``; ``stage`` (``sft``, ``pt``; its reward, PPO, DPO and KTO stages are refused, as TRL's
trainers are); ``finetuning_type`` (``lora`` by default, with ``lora_rank`` 8 and ``lora_target`` ``all``:
every linear layer; ``full``; ``freeze`` and ``oft`` are refused); ``per_device_train_batch_size`` (8) x
``gradient_accumulation_steps`` x the processes (``llamafactory-cli`` starts one a GPU of the node, the job's
GPUs here); ``max_steps``, else ``num_train_epochs`` (3) over ``dataset`` (names, comma-separated, each at
most ``max_samples`` rows, less ``val_size``); ``cutoff_len`` (2048), with ``packing`` (on for ``pt``) an
epoch the datasets' tokens over it, else a sample at most that long (the length predicted: an upper bound);
``bf16``/``fp16``; gradient checkpointing, on unless ``disable_gradient_checkpointing``; ``optim``;
``deepspeed``'s JSON (its ZeRO stage). Its demo datasets are counted in its ``data/`` folder (commit
ff6d4d1); any other name is looked up in the table (`hub_dataset`). Quantization (``quantization_bit``) is
not predicted: the adapters' job is predicted in the precision it trains in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.jobscript.arguments import counts
from advisor.jobscript.datasets import Dataset
from advisor.jobscript.finetuners import (
    CONFIG_ENDINGS,
    SIZE_REMEDY,
    FinetuneCommand,
    config_unread,
    fixed_by_config,
    hub_dataset,
    kept_rows,
)
from advisor.jobscript.trainers import Undescribed, model_reference, optimizer_named, refuse_unpredicted

LLAMAFACTORY = "llamafactory"
_PROGRAMS = frozenset({"llamafactory-cli train", "lmf train"})
_DEMOS = {"alpaca_en_demo": 999, "alpaca_zh_demo": 1000, "identity": 91, "glaive_toolcall_en_demo": 300}
"""Rows of the demo datasets its examples train on (``data/*.json`` at LLaMA-Factory's ff6d4d1)."""
_STAGES = {"rm": "reward", "ppo": "ppo", "dpo": "dpo", "kto": "kto"}


def llamafactory_style(program: str, flags: Mapping[str, str]) -> bool:
    """Its command, or its config by its own keys under another program (``python src/train.py x.yaml``)."""
    return program in _PROGRAMS or ("model-name-or-path" in flags and "finetuning-type" in flags)


def read_llamafactory(command: FinetuneCommand, datasets: Mapping[str, Dataset]) -> dict[str, Any]:
    """The job description's values; `AtRunTime` where a value is computed at run time; `Undescribed`
    where the config leaves the job undescribed or trains in a way the advisor does not predict."""
    config = next((word for word in command.positional if word.endswith(CONFIG_ENDINGS)), "its config")
    stage = command.value("stage", "sft") or "sft"
    refuse_unpredicted(f"LLaMA-Factory's {_STAGES.get(stage, stage)} stage")
    name = command.value("model-name-or-path")
    if not name:
        raise Undescribed(config_unread("LLaMA-Factory", config, "model_name_or_path", command.unread))
    model = model_reference(name)
    if model is None:
        raise Undescribed(
            f'LLaMA-Factory\'s model_name_or_path "{name}" is not a model name the advisor builds'
        )
    batch = command.value("per-device-train-batch-size", "8") or ""
    accumulation = command.value("gradient-accumulation-steps", "1") or ""
    if not counts(batch, accumulation):
        raise Undescribed(
            f"LLaMA-Factory's per_device_train_batch_size {batch} x gradient_accumulation_steps "
            f"{accumulation} is not a batch"
        )
    values: dict[str, Any] = {
        "model": model, "task": "causal-lm", "model_kwargs": {},
        "sequence_length": command.value("cutoff-len", "2048") or "2048",
        "global_batch": str(int(batch) * int(accumulation) * command.world),
        "gradient_checkpointing": not command.true("disable-gradient-checkpointing"),
    }  # fmt: skip
    values |= _adapters(command)
    optimizer = optimizer_named(command.value("optim", "adamw_torch") or "")
    values |= {"optimizer": optimizer} if optimizer else {}
    stage_of_zero = command.value("deepspeed.zero-optimization.stage") or ""
    values |= {"zero_stage": stage_of_zero} if stage_of_zero.isdigit() else {}
    values |= fixed_by_config(command.true("bf16") or command.true("fp16"), accumulation)
    return values | _length(command, values, config, stage, datasets)


def _adapters(command: FinetuneCommand) -> dict[str, Any]:
    """LoRA's rank and targets (``all``: every linear layer); a full fine-tune adds none."""
    kind = command.value("finetuning-type", "lora") or "lora"
    if kind == "full":
        return {}
    if kind != "lora":
        raise Undescribed(
            f"LLaMA-Factory's finetuning_type {kind} trains part of the model in a way the advisor does not "
            "predict: it predicts full fine-tuning and LoRA"
        )
    targets = [word.strip() for word in (command.value("lora-target", "all") or "all").split(",")]
    return {
        "lora_rank": command.value("lora-rank", "8"),
        "lora_targets": ["all-linear" if word == "all" else word for word in targets if word],
    }


def _length(
    command: FinetuneCommand,
    values: Mapping[str, Any],
    config: str,
    stage: str,
    datasets: Mapping[str, Dataset],
) -> dict[str, Any]:
    """``max_steps``, else its epochs over the datasets' rows (packed: their tokens over ``cutoff_len``)."""
    steps = command.value("max-steps") or ""
    if counts(steps):
        return {"steps": steps}
    epochs = (command.value("num-train-epochs", "3") or "3").removesuffix(".0")
    names = [word.strip() for word in (command.value("dataset") or "").split(",") if word.strip()]
    packed = command.true("packing", "true" if stage == "pt" else "false")
    cap = command.value("max-samples") or ""
    rows = [None if packed and cap.isdigit() else _rows(name, datasets, packed) for name in names]
    plural = "" if epochs == "1" else "s"
    trains = f"LLaMA-Factory trains {values['model']} for {epochs} epoch{plural}"
    remedy = f"or set max_steps in {config}"
    unknown = [name for name, count in zip(names, rows, strict=True) if count is None]
    if not names or unknown:
        data = f'"{unknown[0]}", a dataset the advisor does not know' if unknown else "data it names none of"
        if packed and unknown:
            data += f" packed into sequences of {values['sequence_length']} tokens"
        size = "the packed sequences of an epoch" if packed else "its training samples"
        raise Undescribed(
            f"{trains} of {data}: {SIZE_REMEDY} ({size}) {remedy}", {**values, "epochs": epochs}
        )
    taken = [min(count or 0, int(cap)) if cap.isdigit() else count or 0 for count in rows]
    total = kept_rows(sum(taken), command.value("val-size") or "0")
    if packed:
        total //= int(values["sequence_length"])
    return {"epochs": epochs, "dataset_size": str(max(1, total))}


def _rows(name: str, datasets: Mapping[str, Dataset], packed: bool) -> int | None:
    """A dataset's rows (packed: its tokens) by its LLaMA-Factory name, a demo's or the table's. Packed
    under ``max_samples``, the tokens of its first rows are not known (the caller's None)."""
    if not packed and name in _DEMOS:
        return _DEMOS[name]
    found = hub_dataset(name, None, datasets)
    if found is None:
        return None
    return found.tokens if packed else found.samples
