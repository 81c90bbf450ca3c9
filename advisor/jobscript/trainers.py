"""Token and transformer jobs as their trainers read their flags: Hugging Face ``TrainingArguments`` (the
``run_*.py`` examples, TRL, the alignment handbook's recipes) and the Lightning CLI.

``hf``: ``--model_name_or_path`` (or a model trained from scratch: ``--config_name``, else ``--model_type``'s
configuration class's defaults; ``--config_overrides`` over either), ``--per_device_train_batch_size`` (else
DeepSpeed's ``train_micro_batch_size_per_gpu``), ``--gradient_accumulation_steps``, ``--num_train_epochs`` or
``--max_steps``, the sequence length (``--block_size``, ``--max_seq_length``, ``--max_length``,
``--max_source_length``), ``--bf16``/``--fp16`` (or accelerate's ``mixed_precision``, DeepSpeed's
``bf16.enabled``), ``--gradient_checkpointing``, ``--use_peft``/``--lora_r``/``--lora_target_modules``, ZeRO's
stage (FSDP's sharding as the stage it matches), ``--optim`` (AdamW unless named); the task from the program
(``run_clm`` causal LM, ``run_mlm`` masked LM, ``run_glue`` classification, ``run_translation`` seq2seq,
``trl sft`` causal LM; else what the shipped table trains the model for); TRL's preference and online-RL
trainers (``trl dpo``, ``grpo.py``) and Hugging Face's speech, detection, segmentation and image-pretraining
examples are refused (`refuse_unpredicted`).
``lightning``: ``--model.*``, ``--data.batch_size``, ``--trainer.max_steps``/``max_epochs``,
``--trainer.precision``, ``--trainer.accumulate_grad_batches``, ``--trainer.devices``/``num_nodes``.
Epochs need a dataset the table knows (`advisor.jobscript.datasets`): a causal LM packs its tokens into
sequences, others take one sequence per sample; over one it does not know, the values keep their epochs
without a dataset size (`#ADVISOR --dataset-size` may complete them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from advisor.introspect.hub import class_defaults, shipped_architecture
from advisor.jobscript.arguments import counts
from advisor.jobscript.datasets import Dataset, dataset_in

_TASKS = (
    (re.compile(r"run_clm|(^|[/_ ])(sft|pretrain)"), "causal-lm"),
    (re.compile(r"run_mlm|run_plm"), "masked-lm"),
    (re.compile(r"run_glue|run_classification|run_xnli|text_classification"), "sequence-classification"),
    (re.compile(r"run_translation|run_summarization|run_seq2seq"), "seq2seq"),
    (re.compile(r"run_image_classification"), "image-classification"),
)
_DEFAULT_LENGTH = {"causal-lm": 1024, "masked-lm": 512, "sequence-classification": 128, "seq2seq": 1024}
"""What the programs use where the flag is absent (run_clm's 1024, run_glue's 128, TRL's 1024)."""
_LENGTHS = ("block-size", "max-seq-length", "max-length", "max-source-length", "model-max-length")
_FALSE = ("false", "0", "no")
_HF_MODEL = re.compile(r"^[\w.~/-]+$")
_PLAIN = re.compile(r"^[a-z][a-z0-9_]*$")
Value = Callable[..., str | None]


class Undescribed(Exception):
    """A training command whose job the advisor cannot describe, and why: ``values`` holds what was read
    (epochs `#ADVISOR --dataset-size` completes)."""

    def __init__(self, reason: str, values: Mapping[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.values = dict(values or {})


FOLLOWS_ITS_OWN: dict[str, bool] = {"allow_amp": False, "allow_grad_accum": False, "follows_advice": False}
"""A job read from its command follows its own flags (precision, batch), not the advice's variables."""


def refuse_split(program: str, split: Sequence[int]) -> None:
    """`Undescribed` where a program splits its model over GPUs (``split``: its tensor, pipeline and
    context ways), which the advisor does not predict."""
    if any(ways > 1 for ways in split):
        raise Undescribed(
            f"{program} splits its model over GPUs (tensor, pipeline or context parallel: "
            f"{' x '.join(map(str, split))}), which the advisor does not predict: it predicts data "
            "parallelism, each GPU holding the whole model"
        )


_ONE_SEQUENCE = "training on one sequence a sample"
_SEQUENCES_AND_IMAGES = "language models over token sequences and image classification"
_NOT_PREDICTED = (
    (
        re.compile(r"(^|[/_ ])(grpo|rloo|ppo|online_dpo|xpo|nash_md)"),
        "generates completions at each step (online RL: GRPO, RLOO, PPO)",
        _ONE_SEQUENCE,
    ),
    (
        re.compile(r"(^|[/_ ])(dpo|kto|orpo|cpo|reward)"),
        "trains on preference pairs (a chosen and a rejected completion a sample; DPO and KTO add a "
        "reference model's forward)",
        _ONE_SEQUENCE,
    ),
    (re.compile(r"speech|audio|wav2vec2|whisper"), "trains on audio", _SEQUENCES_AND_IMAGES),
    (
        re.compile(r"object_detection|segmentation"),
        "trains a detection or segmentation model",
        _SEQUENCES_AND_IMAGES,
    ),
    (
        re.compile(r"run_mae|run_mim|run_clip"),
        "pretrains on images (masked patches, or images paired with text)",
        _SEQUENCES_AND_IMAGES,
    ),
    (re.compile(r"run_generation"), "generates text and trains nothing", _SEQUENCES_AND_IMAGES),
)
"""TRL's trainers (and LLaMA-Factory's stages) whose step is not one sequence a sample through one model;
Hugging Face's examples of other inputs and tasks than its language models' and image classifiers'."""


def refuse_unpredicted(program: str) -> None:
    """`Undescribed` for a program (or stage) the advisor does not predict. Counted as one sequence a
    sample, a DPO step (two sequences through the policy's forward and backward, and through the reference's
    forward: eight forwards' work) would be predicted as three forwards'; a speech model's input is seconds
    of audio, not a block of tokens."""
    found = next((entry for entry in _NOT_PREDICTED if entry[0].search(program.lower())), None)
    if found is not None:
        _, why, predicted = found
        raise Undescribed(f"{program} {why}, which the advisor does not predict: it predicts {predicted}")


def model_reference(name: str) -> str | None:
    """A name as the advisor builds it: ``hf:NAME`` for the shipped architectures, paths and hub ids
    (``org/name``, ``bert-base-uncased``); a plain identifier otherwise stays a torchvision name."""
    if not _HF_MODEL.fullmatch(name):
        return None
    if _PLAIN.fullmatch(name) and shipped_architecture(name) is None:
        return name
    return f"hf:{name}"


def optimizer_named(name: str) -> str | None:
    """An optimizer's name (``adamw_torch_fused``, ``sgd``) as the memory model counts its state; None
    for one it does not know (counted as SGD's, as benchmarked)."""
    lowered = name.lower()
    if "adamw" in lowered:
        return "adamw"
    if "adam" in lowered:
        return "adam"
    return "sgd" if "sgd" in lowered or "momentum" in lowered else None


def read_hf(
    program: str, flags: Mapping[str, str], world: int, datasets: Mapping[str, Dataset]
) -> dict[str, Any] | None:
    """A Hugging Face trainer's job, from its (merged) flags; None where it says too little."""
    refuse_unpredicted(program)
    task = next((task for pattern, task in _TASKS if pattern.search(program.lower())), None)
    name = flags.get("model-name-or-path") or flags.get("model") or flags.get("config-name")
    if name is None and flags.get("model-type"):
        name = _class_defaults(program, flags["model-type"])
    processes = flags.get("accelerate.num-processes", "")
    world = int(processes) if counts(processes) else world
    batch = flags.get("per-device-train-batch-size") or flags.get("deepspeed.train-micro-batch-size-per-gpu")
    accumulation = flags.get("gradient-accumulation-steps") or flags.get(
        "deepspeed.gradient-accumulation-steps"
    )
    precision = [flags.get("bf16"), flags.get("fp16")]
    amp = any(value is not None and value.lower() not in _FALSE for value in precision) or _accelerated(flags)
    common = _common(flags, name, task, _Batching(batch or "8", accumulation or "1", world), amp)
    if common is None:
        return None
    optimizer = optimizer_named(flags.get("optim", "adamw_torch"))  # TrainingArguments' default
    common |= {} if optimizer is None else {"optimizer": optimizer}
    steps = flags.get("max-steps") or flags.get("max-train-steps")  # the Trainer's; the no_trainer scripts'
    epochs = flags.get("num-train-epochs") or "3"
    return _length(common, steps, epochs, _data_words(flags), datasets)


def read_lightning(
    flags: Mapping[str, str], world: int, datasets: Mapping[str, Dataset]
) -> dict[str, Any] | None:
    """A Lightning CLI job, from ``--trainer.*``, ``--data.*`` and ``--model.*`` (and its ``--config``)."""
    keys = ("model-name-or-path", "pretrained-model-name-or-path", "model-name", "arch", "backbone", "model")
    name = next((flags[f"model.{key}"] for key in keys if flags.get(f"model.{key}")), None)
    precision = flags.get("trainer.precision", "32")
    devices = flags.get("trainer.devices", "")
    nodes = flags.get("trainer.num-nodes", "1")
    if devices.isdigit() and nodes.isdigit():
        world = int(devices) * int(nodes)
    batch = flags.get("data.batch-size")
    accumulation = flags.get("trainer.accumulate-grad-batches", "1")
    amp = precision.startswith(("16", "bf16"))
    batching = _Batching(batch, accumulation, world)
    common = _common(_prefixed(flags), name, flags.get("model.task"), batching, amp)
    if common is None:
        return None
    steps, epochs = flags.get("trainer.max-steps"), flags.get("trainer.max-epochs") or "1000"
    return _length(common, steps, epochs, _data_words(flags), datasets)


def _data_words(flags: Mapping[str, str]) -> list[str | None]:
    """Values that name the data (``--dataset_name``, ``--task_name``, ``--data.data_dir``): not every
    path, where a user's name could hold a dataset's. First the dataset with its configuration as one word
    (``wmt16-ro-en``): the table names a dataset whose configurations differ in size by both."""
    named = ("dataset", "task-name", "train-file", "train-dir", "data-dir", "data.")
    name, config = flags.get("dataset-name"), flags.get("dataset-config-name")
    configured = f"{name}-{config}" if name and config else None
    return [configured, *(value for key, value in flags.items() if any(word in key for word in named))]


_NAMING = ("dataset-name", "task-name", "dataset", "train-file", "train-dir", "data-dir", "data-path", "root")


def named_data(flags: Mapping[str, str]) -> str | None:
    """The data a Hugging Face or Lightning command trains on, as its user would name it: the dataset (with
    its configuration, ``"wmt16" (ro-en)``), else its file or folder; None where no flag names it."""
    key = next((key for word in _NAMING for key in flags if key.endswith(word) and flags[key]), None)
    if key is None:
        return None
    config = flags.get(key.replace("dataset-name", "dataset-config-name")) if "dataset-name" in key else None
    return f'"{flags[key]}"' + (f" ({config})" if config else "")


def _prefixed(flags: Mapping[str, str]) -> dict[str, str]:
    """Lightning's ``data.max_length``, ``model.attn_implementation`` as the trainers' plain flags."""
    return {
        key.split(".", 1)[1]: value for key, value in flags.items() if key.startswith(("data.", "model."))
    }


def _accelerated(flags: Mapping[str, str]) -> bool:
    mixed = flags.get("accelerate.mixed-precision", "no").lower() in ("fp16", "bf16")
    speed = [flags.get("deepspeed.bf16.enabled", ""), flags.get("deepspeed.fp16.enabled", "")]
    return mixed or any(value.lower() == "true" for value in speed)


@dataclass(frozen=True)
class _Batching:
    """What the global batch is made of: the batch flag's samples per process, the accumulation flag,
    and the processes."""

    batch: str | None
    accumulation: str
    world: int


def _common(
    flags: Mapping[str, str], name: str | None, task: str | None, batching: _Batching, amp: bool
) -> dict[str, Any] | None:
    batch, accumulation, world = batching.batch, batching.accumulation, batching.world
    if not name or not batch or not batch.isdigit() or not accumulation.isdigit():
        return None
    model = model_reference(name)
    if model is None or int(batch) < 1 or int(accumulation) < 1:
        return None
    values: dict[str, Any] = {"model": model, "global_batch": str(int(batch) * int(accumulation) * world)}
    length = next((flags[key] for key in _LENGTHS if flags.get(key, "").isdigit()), None)
    task = task or _trained_for(name)
    if task is not None:
        values["task"] = task
    if task != "image-classification" and model.startswith("hf:"):
        values["sequence_length"] = length or str(_DEFAULT_LENGTH.get(task or "causal-lm", 1024))
        if task == "seq2seq":
            values["target_length"] = flags.get("max-target-length", "128")
    kwargs = {"attn_implementation": flags["attn-implementation"]} if flags.get("attn-implementation") else {}
    values["model_kwargs"] = _overrides(flags.get("config-overrides", "")) | kwargs
    return values | _settings(flags, amp, accumulation)


def _class_defaults(program: str, model_type: str) -> str:
    """A model trained from scratch (``--model_type gpt2``, no ``--config_name``): its configuration
    class's defaults, as the shipped entry that holds them (GPT2Config's are gpt2's)."""
    name = class_defaults(model_type)
    if name is None:
        raise Undescribed(
            f"{program} trains a new {model_type} model from its configuration class's defaults, which the "
            "advisor does not know: name the configuration (--config_name NAME) or add "
            "#ADVISOR --model hf:NAME"
        )
    return name


def _overrides(text: str) -> dict[str, Any]:
    """``--config_overrides "n_embd=1024,n_layer=48"``, each value as transformers reads it: an integer, a
    float, a boolean, else the text."""
    overrides: dict[str, Any] = {}
    for pair in filter(None, (part.strip() for part in text.split(","))):
        key, _, value = pair.partition("=")
        overrides[key.strip()] = _typed(value.strip())
    return overrides


def _typed(value: str) -> Any:
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            continue
    return value


def _trained_for(name: str) -> str | None:
    """The task the shipped table trains a model for, where the program names none (a Lightning module, a
    custom ``train.py``): BERT's masked LM reads 512 tokens where a causal LM's default is 1024, and takes
    one sequence a sample where a causal LM packs its tokens."""
    shipped = shipped_architecture(name)
    return None if shipped is None else str(shipped.task)


def _settings(flags: Mapping[str, str], amp: bool, accumulation: str) -> dict[str, Any]:
    """What the script fixes for itself (it follows its own flags, not the advice's variables)."""
    peft = flags.get("use-peft", "false").lower() not in _FALSE or "lora-r" in flags
    checkpointing = flags.get("gradient-checkpointing", "false").lower() not in _FALSE
    settings: dict[str, Any] = {"gradient_checkpointing": checkpointing}
    if peft:
        settings["lora_rank"] = flags.get("lora-r", "16")  # TRL's ModelConfig default
        targets = flags.get("lora-target-modules", "").strip("[]")
        settings["lora_targets"] = [name.strip(" '\"") for name in targets.split(",") if name.strip(" '\"")]
    own = {"own_amp": amp, "own_accumulation": accumulation}
    return settings | _sharding(flags) | own | FOLLOWS_ITS_OWN


def _sharding(flags: Mapping[str, str]) -> dict[str, Any]:
    """The ZeRO stage DeepSpeed's file (or accelerate's) names, else FSDP's strategy as the stage that
    shards the same state, and whether that strategy is hybrid (sharded within a node only)."""
    speed = flags.get("deepspeed.zero-optimization.stage") or flags.get(
        "accelerate.deepspeed-config.zero-stage"
    )
    if speed is not None:
        return {"zero_stage": speed} if speed.isdigit() else {}
    fsdp = _fsdp_stage(flags)
    if fsdp is None:
        return {}
    stage, hybrid = fsdp
    return {"zero_stage": stage, "hybrid_shard": True} if hybrid else {"zero_stage": stage}


_FSDP_STAGES = {
    "full-shard": "3",
    "1": "3",
    "shard-grad-op": "2",
    "2": "2",
    "no-shard": "0",
    "3": "0",
    "hybrid-shard": "3",
    "4": "3",
    "hybrid-shard-zero2": "2",
    "5": "2",
}
"""FSDP's sharding strategies (by name, or accelerate's number) as the ZeRO stage that shards the same state;
the hybrid ones (`_HYBRID`) shard it among one node's devices only."""
_HYBRID = frozenset({"hybrid-shard", "4", "hybrid-shard-zero2", "5"})


def _fsdp_stage(flags: Mapping[str, str]) -> tuple[str, bool] | None:
    """HF Trainer's ``--fsdp "full_shard auto_wrap"``, else accelerate's ``fsdp_config`` (its strategy;
    FULL_SHARD, accelerate's default, where an FSDP file names none): the stage, and whether it is hybrid."""
    strategy = flags.get("accelerate.fsdp-config.fsdp-sharding-strategy")
    if strategy is None and flags.get("accelerate.distributed-type", "").upper() == "FSDP":
        strategy = "full-shard"
    words = [
        word.strip().lower().replace("_", "-") for word in [*flags.get("fsdp", "").split(), strategy or ""]
    ]
    return next(((_FSDP_STAGES[word], word in _HYBRID) for word in words if word in _FSDP_STAGES), None)


def _length(
    values: dict[str, Any],
    steps: str | None,
    epochs: str,
    words: list[str | None],
    datasets: Mapping[str, Dataset],
) -> dict[str, Any]:
    """Steps as given, else epochs over a known dataset: a causal LM's tokens packed into sequences (over
    one the table lacks, the epochs alone). The dataset also gives a classifier its classes, and an image
    model its input side."""
    dataset = dataset_in(words, datasets)
    if dataset is not None:
        values = values | _shaped(values, dataset)
    if steps and steps not in ("-1", "0"):
        return values | {"steps": steps}
    if dataset is None:
        return values | {"epochs": epochs}
    samples = dataset.samples
    length = int(values.get("sequence_length", 0))
    if dataset.tokens is not None and length and values.get("task", "causal-lm") == "causal-lm":
        samples = max(1, dataset.tokens // length)
    return values | {"epochs": epochs, "dataset_size": str(samples)}


def _shaped(values: Mapping[str, Any], dataset: Dataset) -> dict[str, Any]:
    kwargs = dict(values["model_kwargs"])
    hugging_face = str(values["model"]).startswith("hf:")
    shaped: dict[str, Any] = {}
    if dataset.classes is not None and values.get("task") in (
        "sequence-classification",
        "image-classification",
    ):
        kwargs["num_labels" if hugging_face else "num_classes"] = dataset.classes
    if dataset.side is not None and "sequence_length" not in values:
        shaped["input_shape"] = ["3", str(dataset.side), str(dataset.side)]
        if not hugging_face and dataset.classes is not None:
            kwargs["num_classes"] = dataset.classes
    return shaped | {"model_kwargs": kwargs}
