"""Megatron-LM's GPT pretraining read from its flags (`advisor.jobscript.megatron`), as its own example
scripts keep them: in strings over several lines and in arrays. It described no job at all."""

from __future__ import annotations

from pathlib import Path

from advisor.introspect.run import TaskInput, introspect
from advisor.jobscript.submission import ParsedSubmission, parse_job

GPT_345M = """#!/bin/bash
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH --time=2-00:00:00
# examples/pretrain_gpt_distributed.sh
GPUS_PER_NODE=8
DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes 1 --node_rank 0 --master_addr localhost"
GPT_ARGS="
    --num-layers 24 \\
    --hidden-size 1024 \\
    --num-attention-heads 16 \\
    --seq-length 1024 \\
    --max-position-embeddings 1024 \\
    --micro-batch-size 8 \\
    --global-batch-size 256 \\
    --lr 0.00015 \\
    --train-iters 500000 \\
    --fp16
"
DATA_ARGS="--data-path my-gpt2_text_document --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt"
torchrun $DISTRIBUTED_ARGS pretrain_gpt.py $GPT_ARGS $DATA_ARGS --save ckpt --load ckpt
"""
LLAMA_LIKE = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gres=gpu:8
#SBATCH --time=2-00:00:00
GPT_MODEL_ARGS=(
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 11008
    --num-attention-heads 32
    --group-query-attention --num-query-groups 8   # grouped-query attention
    --seq-length 4096 --max-position-embeddings 4096
    --swiglu --normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights
)
TRAINING_ARGS=(--micro-batch-size 1 --global-batch-size 1024 --train-samples 100000000 --bf16)
TRAINING_ARGS+=(--recompute-activations)
MODEL_PARALLEL=(--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1)
srun torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py ${GPT_MODEL_ARGS[@]} ${TRAINING_ARGS[@]} \\
    ${MODEL_PARALLEL[@]} --vocab-size 32000
"""


def _parsed(tmp_path: Path, text: str) -> ParsedSubmission:
    script = tmp_path / "job.sh"
    return parse_job(text.encode(), str(script), [str(script)], {})


def test_gpt_345m_is_gpt2_of_its_shape_its_global_batch_accumulated_over_eight_gpus(tmp_path: Path) -> None:
    parsed = _parsed(tmp_path, GPT_345M)
    assert parsed.description is not None, parsed.undescribed
    described = parsed.description.model_dump()
    shape = {"n_layer": 24, "n_embd": 1024, "n_head": 16, "n_positions": 1024, "vocab_size": 50304}
    expected = {
        "model": "hf:gpt2",
        "model_kwargs": shape,
        "sequence_length": 1024,
        "global_batch": 256,
        "steps": 500000,
        "own_amp": True,
        "own_accumulation": 4,  # 256 = 8 a GPU x 8 GPUs x 4
        "optimizer": "adamw",
    }
    assert {key: described[key] for key in expected} == expected
    assert str(parsed.inferred_from).startswith(
        f"{tmp_path / 'job.sh'}:21 (megatron): torchrun --nproc_per_node 8"
    )


def test_the_gpt_it_describes_has_the_parameters_counted_by_hand(tmp_path: Path) -> None:
    """A layer 12h^2 + 13h (attention 4h^2 + 4h, MLP 8h^2 + 5h, two norms 4h), 24 of them, the token table
    (GPT-2's 50,257 tokens padded to a multiple of 128, as Megatron builds it) and the position table, the
    last norm; the head is the token table, tied: GPT-2 medium's shape."""
    description = _parsed(tmp_path, GPT_345M).description
    assert description is not None
    table = introspect(
        description.model, kwargs=description.model_kwargs, allow_factories=False, given=TaskInput(1024)
    )
    hidden = 1024
    by_hand = 24 * (12 * hidden**2 + 13 * hidden) + 50304 * hidden + 1024 * hidden + 2 * hidden
    assert table.totals.parameters == by_hand == 354_871_296


def test_a_llama_shaped_model_in_arrays_its_samples_as_steps(tmp_path: Path) -> None:
    parsed = _parsed(tmp_path, LLAMA_LIKE)
    assert parsed.description is not None, parsed.undescribed
    described = parsed.description.model_dump()
    shape = {
        "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
        "intermediate_size": 11008, "max_position_embeddings": 4096, "tie_word_embeddings": False,
        "vocab_size": 32000,
    }  # fmt: skip
    expected = {"model": "hf:llama-2-7b-hf", "model_kwargs": shape, "global_batch": 1024, "steps": 97657}
    assert {key: described[key] for key in expected} == expected, "100,000,000 samples of 1,024 a step"
    assert described["own_accumulation"] == 64 and described["gradient_checkpointing"] is True


def test_a_model_split_over_gpus_says_the_advisor_does_not_predict_it(tmp_path: Path) -> None:
    split = LLAMA_LIKE.replace("--tensor-model-parallel-size 1", "--tensor-model-parallel-size 4")
    parsed = _parsed(tmp_path, split)
    assert parsed.description is None and parsed.undescribed == (
        f"{tmp_path / 'job.sh'}:17: pretrain_gpt.py splits its model over GPUs (tensor, pipeline or context "
        "parallel: 4 x 1 x 1), which the advisor does not predict: it predicts data parallelism, each GPU "
        "holding the whole model"
    )


def test_a_hugging_face_tokenizer_gives_the_vocabulary_and_llama_3_8b_its_parameters(tmp_path: Path) -> None:
    """Llama 3 8B's shape under Megatron with its tokenizer (``--tokenizer-type HuggingFaceTokenizer
    --tokenizer-model``): 128,256 tokens (already a multiple of 128), not LlamaConfig's 32,000. By hand: a
    layer's attention 4096^2 x 2 (q, o) + 4096 x 1024 x 2 (k, v: 8 groups of 128), its MLP 3 x 4096 x 14,336,
    two norms of 4,096; 32 layers, untied token and output tables of 128,256 x 4,096, the last norm:
    8,030,261,248, Llama 3 8B's 8.03 billion."""
    text = LLAMA_LIKE.replace("--ffn-hidden-size 11008", "--ffn-hidden-size 14336").replace(
        "--vocab-size 32000",
        "--tokenizer-type HuggingFaceTokenizer --tokenizer-model meta-llama/Meta-Llama-3-8B",
    )
    description = _parsed(tmp_path, text.replace("--seq-length 4096", "--seq-length 8192")).description
    assert description is not None and description.model_kwargs["vocab_size"] == 128256
    table = introspect(
        description.model, kwargs=description.model_kwargs, allow_factories=False, given=TaskInput(8192)
    )
    hidden, groups_width, mlp, tokens = 4096, 1024, 14336, 128256
    layer = 2 * hidden**2 + 2 * hidden * groups_width + 3 * hidden * mlp + 2 * hidden
    by_hand = 32 * layer + 2 * tokens * hidden + hidden
    assert table.totals.parameters == by_hand == 8_030_261_248
    unknown = _parsed(tmp_path, text.replace("meta-llama/Meta-Llama-3-8B", "/models/tokenizer.model"))
    assert unknown.description is not None and "vocab_size" not in unknown.description.model_kwargs
