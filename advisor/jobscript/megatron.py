"""Megatron-LM's GPT pretraining (``pretrain_gpt.py``) as its flags define the job: the model's shape
(``--num-layers``, ``--hidden-size``, ``--num-attention-heads``, ``--ffn-hidden-size``, ``--seq-length``),
its batch (``--micro-batch-size`` per data-parallel rank, ``--global-batch-size``, accumulated to it), its
length (``--train-iters``, else ``--train-samples`` over the global batch), ``--fp16``/``--bf16`` and
activation recomputation.

The model is built as transformers' class of the same shape: GPT-2's (learned positions, GELU, LayerNorm)
unless the flags say Llama's (``--swiglu``, ``--normalization RMSNorm``, ``--position-embedding-type
rope``; ``--group-query-attention`` with ``--num-query-groups``; embeddings tied unless
``--untie-embeddings-and-output-weights``), with its tokenizer's vocabulary, padded as Megatron pads it:
``--vocab-size``, else ``--tokenizer-model``'s where it names a shipped Hugging Face model
(``HuggingFaceTokenizer``: Llama 3's 128,256), else GPT-2's for a GPT and the class's for a Llama.
A model split over GPUs (tensor, pipeline or context parallel) the advisor does not predict: it says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.introspect.hub import shipped_architecture
from advisor.jobscript.arguments import counts
from advisor.jobscript.trainers import FOLLOWS_ITS_OWN, refuse_split

_SIZES = ("num-layers", "hidden-size", "num-attention-heads", "seq-length")
_SPLITS = ("tensor-model-parallel-size", "pipeline-model-parallel-size", "context-parallel-size")
_GPT = "gpt2"
_GPT2_TOKENS = "50257"
"""The GPT-2 BPE vocabulary (``--vocab-file gpt2-vocab.json``), the GPT models' tokenizer."""
_LLAMA = "llama-2-7b-hf"
"""The shipped entries whose configuration classes the shapes are built on (`advisor.introspect.hub`)."""


def megatron_style(flags: Mapping[str, str]) -> bool:
    """Flags only Megatron's programs take."""
    return "micro-batch-size" in flags and "num-layers" in flags


def read_megatron(program: str, flags: Mapping[str, str], world: int) -> dict[str, Any] | None:
    """The job's values; None where a size is missing; `Undescribed` where the model is split over GPUs."""
    sizes = [
        flags.get(name, "") for name in ("num-layers", "hidden-size", "num-attention-heads", "seq-length")
    ]
    micro = flags.get("micro-batch-size", "")
    if not counts(*sizes, micro):
        return None
    split = [int(ways) if (ways := flags.get(name, "1")).isdigit() else 1 for name in _SPLITS]
    refuse_split(program, split)
    layers, hidden, heads, length = map(int, sizes)
    given = flags.get("global-batch-size", "")
    global_batch = int(given) if given.isdigit() else int(micro) * world
    accumulation, left = divmod(global_batch, int(micro) * world)
    if accumulation < 1 or left:
        return None
    steps = _steps(flags, global_batch)
    if steps is None:
        return None
    recompute = "recompute-activations" in flags or "recompute-granularity" in flags
    return {
        "model": f"hf:{_LLAMA if _llama(flags) else _GPT}",
        "model_kwargs": _shape(flags, layers, hidden, heads, length),
        "task": "causal-lm",
        "sequence_length": str(length),
        "global_batch": str(global_batch),
        "steps": str(steps),
        "optimizer": "sgd" if flags.get("optimizer") == "sgd" else "adamw",  # its Adam decouples decay
        "gradient_checkpointing": recompute,
        "own_amp": "fp16" in flags or "bf16" in flags,
        "own_accumulation": str(accumulation),
    } | FOLLOWS_ITS_OWN


def _steps(flags: Mapping[str, str], global_batch: int) -> int | None:
    iterations, samples = flags.get("train-iters", ""), flags.get("train-samples", "")
    if iterations.isdigit():
        return int(iterations)
    return -(-int(samples) // global_batch) if samples.isdigit() else None


def _llama(flags: Mapping[str, str]) -> bool:
    return (
        "swiglu" in flags
        or flags.get("normalization", "").lower() == "rmsnorm"
        or flags.get("position-embedding-type", "").lower() == "rope"
    )


def _shape(flags: Mapping[str, str], layers: int, hidden: int, heads: int, length: int) -> dict[str, Any]:
    """The configuration class's fields of the model's shape."""
    given = flags.get("max-position-embeddings", "")
    positions = int(given) if given.isdigit() else length
    ffn = flags.get("ffn-hidden-size", "")
    tokens = flags.get("vocab-size", "") or _tokenizer_tokens(flags)
    vocabulary = _padded(flags, tokens or (_GPT2_TOKENS if not _llama(flags) else ""))
    if not _llama(flags):
        shape: dict[str, Any] = {
            "n_layer": layers,
            "n_embd": hidden,
            "n_head": heads,
            "n_positions": positions,
        }
        return shape | ({"n_inner": int(ffn)} if ffn.isdigit() else {}) | _vocabulary(vocabulary)
    shape = {
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": _groups(flags, heads),
        "intermediate_size": int(ffn) if ffn.isdigit() else 4 * hidden,
        "max_position_embeddings": positions,
        "tie_word_embeddings": "untie-embeddings-and-output-weights" not in flags,
    }
    return shape | _vocabulary(vocabulary)


def _tokenizer_tokens(flags: Mapping[str, str]) -> str:
    """The vocabulary of the Hugging Face tokenizer ``--tokenizer-model`` names, where the shipped table
    holds it (``meta-llama/Meta-Llama-3-8B``: 128,256); else empty."""
    name = flags.get("tokenizer-model", "")
    found = shipped_architecture(name) if name else None
    size = (found.config if found is not None else {}).get("vocab_size")
    return str(size) if isinstance(size, int) else ""


def _vocabulary(size: str) -> dict[str, Any]:
    return {"vocab_size": int(size)} if size.isdigit() else {}


def _padded(flags: Mapping[str, str], size: str) -> str:
    """The embedding's rows as Megatron builds them: the tokenizer's, rounded up to a multiple of
    ``--make-vocab-size-divisible-by`` (128) times the tensor-parallel ways (GPT-2's 50,257: 50,304)."""
    divisor = flags.get("make-vocab-size-divisible-by", "128")
    if not size.isdigit() or not divisor.isdigit() or int(divisor) < 1:
        return size
    return str(-(-int(size) // int(divisor)) * int(divisor))


def _groups(flags: Mapping[str, str], heads: int) -> int:
    """Key-value heads: ``--num-query-groups`` under ``--group-query-attention``, else one a head."""
    groups = flags.get("num-query-groups", "")
    return int(groups) if "group-query-attention" in flags and groups.isdigit() else heads
