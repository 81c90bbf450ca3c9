"""LLM fine-tuning programs that take their job from a YAML config, read as data (never imported or run).

``axolotl`` (``axolotl train config.yml``, ``accelerate launch -m axolotl.cli.train config.yml``, ``python -m
axolotl.cli.train config.yml``; the command line's ``--key value`` over the file's): ``base_model``;
``micro_batch_size`` (1) per process x ``gradient_accumulation_steps`` (else ``batch_size`` over the
micro-batch) x the processes (accelerate's, else the job's GPUs) over ``context_parallel_size`` x
``tensor_parallel_size``, as axolotl's ``normalize_config`` counts its batch; ``max_steps``, else
``num_epochs`` (1) over ``datasets`` (``path``, with ``name`` its configuration) less ``val_set_size``;
``sequence_len`` (512); ``adapter: lora`` or ``qlora`` with ``lora_r``, ``lora_target_modules``,
``lora_target_linear``; ``bf16`` (``auto`` by default: bf16 where the GPU has it, else fp16) and ``fp16``;
``gradient_checkpointing``; ``optimizer`` (``adamw_torch_fused``); ``deepspeed`` (its JSON,
`advisor.jobscript.recipes`) or ``fsdp``/``fsdp_config``. Unpacked, a sample is one sequence of at most
``sequence_len`` tokens, the length predicted (an upper bound); with ``sample_packing`` an epoch is the
dataset's tokens over ``sequence_len``, known only for a corpus whose tokens the table holds.

``torchtune`` (``tune run [--nproc_per_node N] RECIPE --config FILE [key=value ...]``, the overrides over the
file): ``model._component_``, a builder whose architecture is a shipped Hugging Face one (`TORCHTUNE_MODELS`),
its ``lora_``/``qlora_`` form with ``lora_rank``, ``lora_attn_modules``, ``apply_lora_to_mlp``,
``apply_lora_to_output``; ``batch_size`` x ``gradient_accumulation_steps`` x the processes; ``epochs`` of the
recipe's steps (the dataset's samples spread over the processes, then whole batches, then whole accumulations,
as its data loader drops the last), at most ``max_steps_per_epoch``; ``tokenizer.max_seq_len``; ``dtype``
(bf16: every tensor in bf16, predicted as mixed precision); ``enable_activation_checkpointing``;
``optimizer._component_``; ``dataset._component_`` or its ``source``; a ``distributed`` recipe shards with
FSDP (``fsdp_reshard_after_forward``: ZeRO-3, else 2). A config torchtune ships is a name, not a file here.

What the job needs and the config does not say raises `Undescribed`, with why and what was read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from advisor.jobscript.arguments import counts
from advisor.jobscript.datasets import Dataset, dataset_in
from advisor.jobscript.launchers import UNKNOWN, AtRunTime
from advisor.jobscript.trainers import FOLLOWS_ITS_OWN, Undescribed, model_reference, optimizer_named

FINETUNERS = ("axolotl", "torchtune")
FALSE_WORDS = ("false", "0", "no", "none", "null")
CONFIG_ENDINGS = (".yaml", ".yml", ".json")
_AXOLOTL = frozenset({"axolotl train", "axolotl.cli.train"})
TORCHTUNE_MODELS = {
    "llama2_7b": "meta-llama/Llama-2-7b-hf",
    "llama2_13b": "meta-llama/Llama-2-13b-hf",
    "llama2_70b": "meta-llama/Llama-2-70b-hf",
    "llama3_8b": "meta-llama/Meta-Llama-3-8B",
    "llama3_70b": "meta-llama/Meta-Llama-3-70B",
    "llama3_1_8b": "meta-llama/Llama-3.1-8B",
    "llama3_1_70b": "meta-llama/Llama-3.1-70B",
    "llama3_2_1b": "meta-llama/Llama-3.2-1B",
    "llama3_2_3b": "meta-llama/Llama-3.2-3B",
    "mistral_7b": "mistralai/Mistral-7B-v0.1",
    "qwen2_5_0_5b": "Qwen/Qwen2.5-0.5B",
    "qwen2_5_1_5b_base": "Qwen/Qwen2.5-1.5B",
    "qwen2_5_1_5b_instruct": "Qwen/Qwen2.5-1.5B-Instruct",
    "qwen2_5_3b": "Qwen/Qwen2.5-3B",
    "qwen2_5_7b_base": "Qwen/Qwen2.5-7B",
    "qwen2_5_7b_instruct": "Qwen/Qwen2.5-7B-Instruct",
    "gemma_2b": "google/gemma-2b",
    "gemma_7b": "google/gemma-7b",
}
"""torchtune's model builders (``torchtune.models.llama3_2.llama3_2_1b``; ``lora_`` and ``qlora_`` the same
model) whose vocabulary, layers, heads, key-value heads, widths and tied embeddings equal a shipped Hugging
Face architecture's (torchtune's ``_model_builders.py`` against ``advisor/data/architectures.toml``); any
other is not guessed."""
_TORCHTUNE_SOURCES = {
    "alpaca_dataset": "tatsu-lab/alpaca",
    "alpaca_cleaned_dataset": "yahma/alpaca-cleaned",
    "samsum_dataset": "Samsung/samsum",
    "slimorca_dataset": "Open-Orca/SlimOrca-Dedup",
    "grammar_dataset": "liweili/c4_200m",
    "cnn_dailymail_articles_dataset": "ccdv/cnn_dailymail",
    "wikitext_dataset": "EleutherAI/wikitext_document_level",
}
"""The Hugging Face dataset each torchtune dataset builder loads where its config names no ``source``."""
_TORCHTUNE_LORA = {"output_proj": "o_proj"}
"""torchtune's attention projections by the names Hugging Face's Llama, Mistral, Qwen and Gemma give them."""
_MLP = ["gate_proj", "up_proj", "down_proj"]
_PLAIN = str.maketrans("", "", "-_")
SIZE_REMEDY = 'add "#ADVISOR --dataset-size N"'


@dataclass(frozen=True)
class FinetuneCommand:
    """A fine-tuning command as read: its program, its config's keys with the command line's over them (``-``
    for ``_``), its other words, the files that could not be read, and the processes it starts."""

    program: str
    flags: Mapping[str, str]
    positional: Sequence[str]
    unread: Sequence[str]
    world: int

    def value(self, key: str, default: str | None = None) -> str | None:
        found = self.flags.get(key, default)
        if found is not None and UNKNOWN in found:
            raise AtRunTime(key)
        return found

    def true(self, key: str, default: str = "false") -> bool:
        return (self.value(key, default) or "").lower() not in FALSE_WORDS


def finetuner_style(program: str, flags: Mapping[str, str]) -> str | None:
    """``axolotl`` or ``torchtune`` by the program, or an axolotl config by its own keys (an older
    ``accelerate launch scripts/finetune.py config.yml``); None for another program."""
    if program.startswith("tune run"):
        return "torchtune"
    if program in _AXOLOTL or {"base-model", "micro-batch-size"} <= flags.keys():
        return "axolotl"
    return None


def read_finetuner(
    style: str, command: FinetuneCommand, datasets: Mapping[str, Dataset]
) -> dict[str, Any] | None:
    """The job description's values; `AtRunTime` where a value is computed at run time; `Undescribed`
    where the config leaves the job undescribed."""
    if style == "torchtune":
        return _torchtune(with_overrides(command), datasets)
    return _axolotl(command, datasets)


def fixed_by_config(amp: bool, accumulation: str) -> dict[str, Any]:
    """What these programs fix for themselves: they read their config, not the advice's variables."""
    own = {"own_amp": amp, "own_accumulation": accumulation}
    return own | FOLLOWS_ITS_OWN


def _axolotl(command: FinetuneCommand, datasets: Mapping[str, Dataset]) -> dict[str, Any]:
    config = next((word for word in command.positional if word.endswith(CONFIG_ENDINGS)), "its config")
    name = command.value("base-model")
    if not name:
        raise Undescribed(config_unread("axolotl", config, "base_model", command.unread))
    model = model_reference(name)
    if model is None:
        raise Undescribed(f'axolotl\'s base_model "{name}" is not a model name the advisor builds')
    micro, accumulation = (
        command.value("micro-batch-size", "1") or "1",
        command.value("gradient-accumulation-steps"),
    )
    total = command.value("batch-size") or ""
    if accumulation is None:
        accumulation = str(int(total) // int(micro)) if total.isdigit() and micro.isdigit() else "1"
    processes = command.value("accelerate.num-processes") or command.value("num-processes") or ""
    world = int(processes) if counts(processes) else command.world
    split = [command.value(key) or "1" for key in ("context-parallel-size", "tensor-parallel-size")]
    if not counts(micro, accumulation, *split):
        raise Undescribed(
            f"axolotl's micro_batch_size {micro} x gradient_accumulation_steps {accumulation} is not a batch"
        )
    batch = int(micro) * int(accumulation) * max(1, world // (int(split[0]) * int(split[1])))
    length = command.value("sequence-len", "512") or "512"
    bf16, fp16 = command.value("bf16", "auto") or "auto", command.true("fp16")
    values: dict[str, Any] = {
        "model": model, "global_batch": str(batch), "task": "causal-lm", "sequence_length": length,
        "model_kwargs": {}, "gradient_checkpointing": command.true("gradient-checkpointing"),
    }  # fmt: skip
    if command.value("adapter") in ("lora", "qlora"):
        targets = [word.strip(" '\"[]") for word in (command.value("lora-target-modules") or "").split(",")]
        linear = ["all-linear"] if command.true("lora-target-linear") else []
        values |= {
            "lora_rank": command.value("lora-r", "8"),
            "lora_targets": [*filter(None, targets), *linear],
        }
    optimizer = optimizer_named(command.value("optimizer", "adamw_torch_fused") or "")
    values |= ({"optimizer": optimizer} if optimizer else {}) | _axolotl_sharding(command)
    values |= fixed_by_config(bf16.lower() not in FALSE_WORDS or fp16, accumulation)
    return values | _axolotl_length(command, values, config, datasets)


def config_unread(program: str, config: str, key: str, unread: Sequence[str]) -> str:
    """Why a config gave no model: it could not be read here (the daemon reads none), or it names none."""
    entry = next((entry for entry in unread if entry.split(" (", 1)[0] == config), None)
    if entry is not None:
        return f"{program}'s config {entry} could not be read: the job's model, batch and length are in it"
    return f"{program}'s config {config} names no {key}"


def _axolotl_sharding(command: FinetuneCommand) -> dict[str, Any]:
    """DeepSpeed's ZeRO stage from the JSON the config names, else FSDP's: ``fsdp: [full_shard, auto_wrap]``
    or ``fsdp_config``'s strategy, FSDP2 (``fsdp_version: 2``) by ``reshard_after_forward`` (True: ZeRO-3)."""
    stage = command.value("deepspeed.zero-optimization.stage") or ""
    if stage.isdigit():
        return {"zero_stage": stage}
    version = command.value("fsdp-version") or command.value("fsdp-config.fsdp-version")
    if version == "2" or "fsdp-config.reshard-after-forward" in command.flags:
        return {"zero_stage": "3" if command.true("fsdp-config.reshard-after-forward", "true") else "2"}
    strategy = command.value("fsdp-config.fsdp-sharding-strategy") or ""
    words = {
        word.strip().lower().replace("_", "-")
        for word in [*(command.value("fsdp") or "").split(","), strategy]
    }
    if "hybrid-shard" in words:
        return {"zero_stage": "3", "hybrid_shard": True}
    if "full-shard" in words:
        return {"zero_stage": "3"}
    return {"zero_stage": "2"} if "shard-grad-op" in words else {}


def _entries(flags: Mapping[str, str], key: str) -> list[dict[str, str]]:
    """A list of mappings in the config (``datasets.0.path``), else the one mapping (``dataset.source``)."""
    numbered: dict[int, dict[str, str]] = {}
    for name, value in flags.items():
        head, _, rest = name.partition(".")
        position, _, field = rest.partition(".")
        if head == key and position.isdigit() and field:
            numbered.setdefault(int(position), {})[field] = value
    if numbered:
        return [numbered[position] for position in sorted(numbered)]
    single = {name.split(".", 1)[1]: value for name, value in flags.items() if name.startswith(f"{key}.")}
    return [single] if single else []


def _axolotl_length(
    command: FinetuneCommand, values: Mapping[str, Any], config: str, datasets: Mapping[str, Dataset]
) -> dict[str, Any]:
    """``max_steps``, else ``num_epochs`` over the datasets' samples (packed: their tokens per sequence)."""
    steps = command.value("max-steps") or ""
    if counts(steps):
        return {"steps": steps}
    epochs = command.value("num-epochs", "1") or "1"
    entries = _entries(command.flags, "datasets")
    named = [entry.get("path", "") for entry in entries]
    found = [hub_dataset(entry.get("path", ""), entry.get("name"), datasets) for entry in entries]
    held = command.value("val-set-size") or "0"
    packed = command.true("sample-packing")
    remedy = f"or set max_steps in {config}"
    trains = f"axolotl trains {values['model']} for {epochs} epoch{'' if epochs == '1' else 's'}"
    unknown = [name for name, dataset in zip(named, found, strict=True) if dataset is None]
    if not entries or unknown:
        data = (
            f'"{unknown[0]}", a dataset the advisor does not know'
            if unknown
            else "data it lists no datasets for"
        )
        reason = f"{trains} of {data}: {SIZE_REMEDY} (its training samples) {remedy}"
        raise Undescribed(reason, {**values, "epochs": epochs})
    known = [dataset for dataset in found if dataset is not None]
    if not packed:
        return {"epochs": epochs, "dataset_size": str(max(1, kept_rows(sum(d.samples for d in known), held)))}
    tokens = [dataset.tokens for dataset in known]
    if None in tokens:
        reason = (
            f'{trains} of "{named[tokens.index(None)]}" packed into sequences of {values["sequence_length"]} '
            f"tokens, and the advisor does not know its tokens: {SIZE_REMEDY} (the packed sequences of an "
            f"epoch) {remedy}"
        )
        raise Undescribed(reason, {**values, "epochs": epochs})
    packs = kept_rows(sum(t or 0 for t in tokens), held) // int(values["sequence_length"])
    return {"epochs": epochs, "dataset_size": str(max(1, packs))}


def hub_dataset(path: str, configuration: str | None, table: Mapping[str, Dataset]) -> Dataset | None:
    """The table's dataset a hub id or folder names: its last part (with its configuration, ``wmt16-ro-en``)
    equal to a table name, ``-``/``_`` aside, else one its configuration contains (``wikitext-2-raw-v1``); not
    any name it contains, as `dataset_in` reads paths: ``mhenrichsen/alpaca_2k_test`` (2,000 rows) holds
    ``alpaca`` (52,002), ``yahma/alpaca-cleaned`` is another set."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    words = {name.lower().translate(_PLAIN), f"{name}-{configuration}".lower().translate(_PLAIN)}
    exact = next((found for key, found in table.items() if key.translate(_PLAIN) in words), None)
    return exact or (dataset_in([configuration], table) if configuration else None)


def kept_rows(total: int, held: str) -> int:
    """What axolotl trains on of ``total`` less ``val_set_size``, held out for evaluation as ``datasets``'
    ``train_test_split`` does: a share under 1 (rounded up), else that many rows."""
    try:
        share = float(held)
    except ValueError:
        return total
    return total - (math.ceil(total * share) if 0 <= share < 1 else int(share))


def with_overrides(command: FinetuneCommand) -> FinetuneCommand:
    """torchtune's ``key=value`` words over its config's keys (``model.lora_rank=16``)."""
    pairs = [word.partition("=") for word in command.positional if "=" in word and not word.startswith("-")]
    overrides = {key.lstrip("~").replace("_", "-"): value for key, _, value in pairs}
    words = [word for word in command.positional if "=" not in word]
    return FinetuneCommand(
        command.program, {**command.flags, **overrides}, words, command.unread, command.world
    )


def _torchtune(command: FinetuneCommand, datasets: Mapping[str, Dataset]) -> dict[str, Any]:
    recipe = command.program.removeprefix("tune run ")
    config = command.value("config") or "its config"
    component = command.value("model.-component-")
    if not component and config in command.unread and not config.endswith(CONFIG_ENDINGS):
        raise Undescribed(
            f'{recipe} runs torchtune\'s own config "{config}", which the advisor cannot read here: copy it '
            f'("tune cp {config} my_config.yaml") and run --config my_config.yaml'
        )
    if not component:
        raise Undescribed(config_unread(f"torchtune's {recipe}", config, "model", command.unread))
    builder = component.rsplit(".", 1)[-1]
    base = builder.removeprefix("qlora_").removeprefix("lora_")
    if base not in TORCHTUNE_MODELS:
        raise Undescribed(
            f"{recipe} trains {component}, a torchtune model the advisor does not match to a Hugging Face "
            "architecture: describe the job with #ADVISOR lines (--model hf:NAME --global-batch N --steps N)"
        )
    batch, accumulation = (
        command.value("batch-size") or "",
        command.value("gradient-accumulation-steps", "1") or "",
    )
    if not counts(batch, accumulation):
        raise Undescribed(f"{recipe}'s batch_size {batch or 'is not given'}: not a batch")
    length = command.value("tokenizer.max-seq-len") or ""
    if not length.isdigit():
        raise Undescribed(
            f"{recipe} pads each batch to its longest sample (tokenizer.max_seq_len is not set), a length "
            "the advisor cannot know: pass tokenizer.max_seq_len=N"
        )
    values: dict[str, Any] = {
        "model": f"hf:{TORCHTUNE_MODELS[base]}", "task": "causal-lm", "sequence_length": length,
        "global_batch": str(int(batch) * int(accumulation) * command.world), "model_kwargs": {},
        "gradient_checkpointing": command.true("enable-activation-checkpointing"),
    }  # fmt: skip
    if builder != base:
        values |= _torchtune_lora(command)
    optimizer = optimizer_named(command.value("optimizer.-component-") or "")
    values |= {"optimizer": optimizer} if optimizer else {}
    if "distributed" in recipe:  # FSDP2 over every process, resharded after forward unless told not to
        values["zero_stage"] = "3" if command.true("fsdp-reshard-after-forward", "true") else "2"
    amp = (command.value("dtype", "fp32") or "").lower() in ("bf16", "fp16")
    values |= fixed_by_config(amp, accumulation)
    return values | _torchtune_length(command, values, recipe, datasets)


def _torchtune_lora(command: FinetuneCommand) -> dict[str, Any]:
    """The adapters a ``lora_`` builder adds (rank 8 by default), by the Hugging Face layers' names."""
    modules = (command.value("model.lora-attn-modules") or "").split(",")
    targets = [_TORCHTUNE_LORA.get(name, name) for name in (word.strip(" '\"[]") for word in modules) if name]
    targets += _MLP if command.true("model.apply-lora-to-mlp") else []
    targets += ["lm_head"] if command.true("model.apply-lora-to-output") else []
    return {"lora_rank": command.value("model.lora-rank", "8"), "lora_targets": targets}


def _torchtune_length(
    command: FinetuneCommand, values: Mapping[str, Any], recipe: str, datasets: Mapping[str, Dataset]
) -> dict[str, Any]:
    """``epochs`` of the recipe's steps per epoch (at most ``max_steps_per_epoch``), as its loop counts."""
    epochs = command.value("epochs", "1") or "1"
    cap = command.value("max-steps-per-epoch") or ""
    entries = _entries(command.flags, "dataset")
    sources = [
        entry.get("source") or _TORCHTUNE_SOURCES.get(entry.get("-component-", "").rsplit(".", 1)[-1], "")
        for entry in entries
    ]
    found = [hub_dataset(source, None, datasets) for source in sources]
    packed = any(entry.get("packed", "false").lower() not in FALSE_WORDS for entry in entries)
    if sources and None not in found and not packed and epochs.isdigit():
        samples = sum(dataset.samples for dataset in found if dataset is not None)
        accumulation = int(values["own_accumulation"])
        batch = int(values["global_batch"]) // command.world // accumulation
        per_epoch = math.ceil(samples / command.world) // batch // accumulation
        steps = min(per_epoch, int(cap)) if cap.isdigit() else per_epoch
        return {"steps": str(max(1, int(epochs) * steps))}
    if cap.isdigit() and epochs.isdigit():  # at most: data the advisor does not know may end an epoch first
        return {"steps": str(int(epochs) * int(cap))}
    unknown = [
        f'"{source}", a dataset the advisor does not know'
        for source, dataset in zip(sources, found, strict=True)
        if dataset is None and source
    ]
    what = next(iter(unknown), f'"{sources[0]}"' if sources and sources[0] else "its dataset")
    length = values["sequence_length"]
    what, size = (
        (f"{what} packed into sequences of {length} tokens", "the packed sequences of an epoch")
        if packed
        else (what, "its training samples")
    )
    plural = "" if epochs == "1" else "s"
    reason = (
        f"{recipe} trains {values['model']} for {epochs} epoch{plural} of {what}: {SIZE_REMEDY} ({size}) "
        "or pass max_steps_per_epoch=N"
    )
    raise Undescribed(reason, {**values, "epochs": epochs})
