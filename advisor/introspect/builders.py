"""Hugging Face and timm models on the meta device, each with the head and loss its task trains.

``hf:NAME_OR_PATH`` is built by transformers' ``AutoModelFor<task>.from_config`` from a configuration
found without a network (`advisor.introspect.hub`), and ``timm:NAME`` by ``timm.create_model`` with
``pretrained=False``: no weights, no download, no code from a model repository (remote code is never
trusted, and a configuration's ``auto_map`` is dropped). The job's model arguments override the
configuration's fields (``num_hidden_layers=2``); ``attn_implementation`` picks the attention (``sdpa``
unless ``eager``: flash kernels are fused attention, costed as sdpa is). Without transformers or timm
installed: one line saying what to install.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from pydantic import JsonValue
from torch import Tensor, nn

from advisor.introspect.errors import IntrospectionError, summary
from advisor.introspect.hub import find_config
from advisor.introspect.table import Task

HF_PREFIX = "hf:"
TIMM_PREFIX = "timm:"
MISSING = "install advisor[models] for Hugging Face and timm models"
_ARCHITECTURE_SUFFIXES = (
    ("ForCausalLM", Task.CAUSAL_LM),
    ("LMHeadModel", Task.CAUSAL_LM),
    ("ForMaskedLM", Task.MASKED_LM),
    ("ForSequenceClassification", Task.SEQUENCE_CLASSIFICATION),
    ("ForConditionalGeneration", Task.SEQ2SEQ),
    ("ForImageClassification", Task.IMAGE_CLASSIFICATION),
)
_AUTO_CLASSES = {
    Task.CAUSAL_LM: "AutoModelForCausalLM",
    Task.MASKED_LM: "AutoModelForMaskedLM",
    Task.SEQUENCE_CLASSIFICATION: "AutoModelForSequenceClassification",
    Task.SEQ2SEQ: "AutoModelForSeq2SeqLM",
    Task.IMAGE_CLASSIFICATION: "AutoModelForImageClassification",
}
_NOT_CONFIG = frozenset({"auto_map", "architectures", "transformers_version", "_name_or_path", "torch_dtype"})


def builds_itself(reference: str) -> bool:
    """A reference built by transformers or timm rather than torchvision or a user's factory."""
    return reference.startswith((HF_PREFIX, TIMM_PREFIX))


def build_named(
    reference: str,
    kwargs: Mapping[str, JsonValue],
    task: Task | None,
    target_length: int | None,
    places: Sequence[Path] | None,
) -> tuple[nn.Module, Task]:
    """The model a ``hf:`` or ``timm:`` reference names, as one training step's module, and its task."""
    if reference.startswith(TIMM_PREFIX):
        return _timm(reference.removeprefix(TIMM_PREFIX), kwargs), Task.IMAGE_CLASSIFICATION
    return _hugging_face(reference.removeprefix(HF_PREFIX), kwargs, task, target_length, places)


def trainable_named(reference: str, kwargs: Mapping[str, JsonValue], device: torch.device) -> nn.Module:
    """A shipped ``hf:`` architecture's step module with random weights on ``device``: what the benchmark
    trains is what introspection counts, built by the same code."""
    if not reference.startswith(HF_PREFIX):
        raise IntrospectionError(f"{reference!r} is not a Hugging Face reference (hf:NAME)")
    module, _task = _hugging_face(reference.removeprefix(HF_PREFIX), kwargs, None, None, None, device)
    return module


def _hugging_face(
    name: str,
    kwargs: Mapping[str, JsonValue],
    task: Task | None,
    target_length: int | None,
    places: Sequence[Path] | None,
    device: torch.device | str = "meta",
) -> tuple[nn.Module, Task]:
    found = find_config(name, places)
    try:
        import transformers
    except ImportError:
        raise IntrospectionError(MISSING) from None
    overrides = {key: value for key, value in kwargs.items() if key != "attn_implementation"}
    values = {key: value for key, value in found.values.items() if key not in _NOT_CONFIG} | overrides
    model_type = values.pop("model_type")
    try:
        config = transformers.AutoConfig.for_model(model_type, **values)
    except (ValueError, TypeError) as error:
        raise IntrospectionError(
            f"{name!r} ({found.place}): transformers {transformers.__version__} has no model type "
            f"{model_type!r}; a model that needs its own code is not built ({summary(error)})"
        ) from None
    chosen = task or found.task or _task_of(found.values.get("architectures"), config)
    attention = "eager" if kwargs.get("attn_implementation") == "eager" else "sdpa"
    auto = getattr(transformers, _AUTO_CLASSES[chosen])
    try:
        with torch.device(device):
            model = auto.from_config(config, attn_implementation=attention)
    except (ValueError, TypeError, KeyError) as error:
        raise IntrospectionError(f"{name!r} cannot be built for {chosen}: {summary(error)}") from None
    return TaskStep(model, chosen, target_length or 0, int(config.num_labels or 2)), chosen


def _task_of(architectures: object, config: Any) -> Task:
    """The task config.json's ``architectures`` names, else an encoder-decoder's seq2seq, an image
    model's classification, and otherwise a causal language model."""
    for architecture in architectures if isinstance(architectures, list) else []:
        for suffix, task in _ARCHITECTURE_SUFFIXES:
            if str(architecture).endswith(suffix):
                return task
    if getattr(config, "is_encoder_decoder", False):
        return Task.SEQ2SEQ
    return Task.IMAGE_CLASSIFICATION if hasattr(config, "image_size") else Task.CAUSAL_LM


def _timm(name: str, kwargs: Mapping[str, JsonValue]) -> nn.Module:
    try:
        import timm
    except ImportError:
        raise IntrospectionError(MISSING) from None
    if not timm.is_model(name):
        raise IntrospectionError(f"{name!r} is not a timm model (timm {timm.__version__})")
    arguments: dict[str, Any] = dict(kwargs)
    try:
        with torch.device("meta"):
            model: nn.Module = timm.create_model(name, pretrained=False, **arguments)
    except (ValueError, TypeError, RuntimeError) as error:
        raise IntrospectionError(f"timm model {name!r}: {summary(error)}") from None
    return model


_ROTARY = ("rope_theta", "rope_parameters", "rope_scaling")
"""A configuration's fields of rotary positions, computed for any length."""


def token_limit(module: nn.Module) -> int | None:
    """The tokens a Hugging Face model's learned position table holds (BERT's 512, GPT-2's 1024): a longer
    input fails the job's first step. None where positions are rotary or relative (Llama, T5): any length."""
    config = getattr(module.model, "config", None) if isinstance(module, TaskStep) else None
    if any(getattr(config, name, None) is not None for name in _ROTARY):
        return None
    limit = getattr(config, "max_position_embeddings", None)
    return limit if isinstance(limit, int) else None


class TaskStep(nn.Module):
    """One training step's forward: the model on its inputs with the labels of its task, to the loss."""

    def __init__(self, model: nn.Module, task: Task, target_length: int, labels: int) -> None:
        super().__init__()
        self.model = model
        self.task = task
        self.target_length = target_length
        self.labels = labels

    def forward(self, inputs: Tensor) -> Tensor:
        rows = inputs.shape[0]
        if self.task in (Task.CAUSAL_LM, Task.MASKED_LM):
            output = self.model(input_ids=inputs, labels=inputs)
        elif self.task is Task.SEQ2SEQ:
            target = self.target_length or inputs.shape[1]  # none given: as long as the source
            output = self.model(input_ids=inputs, labels=inputs.new_zeros(rows, target))
        else:
            labels = inputs.new_zeros(rows, dtype=torch.float if self.labels == 1 else torch.long)
            key = "pixel_values" if self.task is Task.IMAGE_CLASSIFICATION else "input_ids"
            output = self.model(**{key: inputs}, labels=labels)
        loss: Tensor = output.loss
        return loss


def load_libraries() -> list[str]:
    """Loads transformers (with the auto classes `build_named` picks from) and timm, where installed, and
    names those loaded: the daemon builds ``hf:``/``timm:`` tables in its own process, and the first would
    otherwise wait the seconds these imports take. Library code only; a model's own module still loads
    with its first table."""
    loaded: list[str] = []
    with contextlib.suppress(ImportError):
        import transformers

        for auto in ("AutoConfig", *_AUTO_CLASSES.values()):
            getattr(transformers, auto)
        loaded.append("transformers")
    with contextlib.suppress(ImportError):
        import timm  # noqa: F401  (loaded for the requests to come)

        loaded.append("timm")
    return loaded
