"""Token models on the meta device: attention counted by hand, the fused kernel's memory, norms, the
places a Hugging Face configuration is found (a folder, the user's cache, the shipped table), offline."""

from __future__ import annotations

import hashlib
import json
import socket
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from advisor.bench.sequence import family_table
from advisor.factory_table import daemon_table, not_built_here, table_for
from advisor.introspect import IntrospectionError, LayerKind
from advisor.introspect.builders import MISSING
from advisor.introspect.flops import attention
from advisor.introspect.probe import run_probe
from advisor.introspect.run import TaskInput, clear_cache, introspect
from advisor.introspect.table import architecture_hash
from advisor.jobscript.advisor_lines import JobDescription

TINY_GPT2 = {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 101, "n_positions": 64}


def _pairs_by_hand(length_q: int, length_k: int, causal: bool) -> list[tuple[int, int]]:
    return [(i, j) for i in range(length_q) for j in range(length_k) if not causal or j <= i]


@pytest.mark.parametrize("causal", [False, True])
def test_attention_flops_are_the_pairs_counted_one_by_one(causal: bool) -> None:
    # batch 2, 4 query heads sharing 2 key/value heads (grouped-query), 8 positions, 16 per head
    by_hand = 0
    for _matrix in range(2 * 4):
        for _i, _j in _pairs_by_hand(8, 8, causal):
            by_hand += 2 * 16  # q . k: 16 multiply-adds
            by_hand += 2 * 16  # p * v: 16 multiply-adds into the output row
    assert attention((2, 4, 8, 16), (2, 2, 8, 16), (2, 2, 8, 16), causal) == by_hand
    assert by_hand == (18432 if causal else 32768)
    top_left = 2 * (1 + 2 + 3) * 4  # query i sees keys 0..i of 5
    assert attention((1, 1, 3, 2), (1, 1, 5, 2), (1, 1, 5, 2), True) == top_left


class _Attend(nn.Module):
    """One grouped-query causal attention over projections of the input: its layer is the call."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.length = length
        self.q = nn.Linear(8, 4 * 16, bias=False)
        self.kv = nn.Linear(8, 2 * 16, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(x.shape[0], self.length, 8)
        q = self.q(rows).view(x.shape[0], self.length, 4, 16).transpose(1, 2)
        kv = self.kv(rows).view(x.shape[0], self.length, 2, 16).transpose(1, 2)
        return F.scaled_dot_product_attention(q, kv, kv, is_causal=True, dropout_p=0.1, enable_gqa=True)


def test_a_direct_attention_call_is_costed_as_the_fused_kernel_forward_and_backward() -> None:
    probe = run_probe(_Attend(8).to("meta"), (1, 8, 8))
    (layer,) = [layer for layer in probe.layers if layer.kind is LayerKind.ATTENTION]
    assert layer.forward_flops.per_sample == 4 * 18432 // 8 and layer.forward_flops.fixed == 0
    assert layer.backward_flops.per_sample == 2 * layer.forward_flops.per_sample, "dV, dP, dQ, dK"


def test_the_fused_kernel_saves_nothing_that_grows_with_the_square_of_the_length() -> None:
    short, long = (
        run_probe(_Attend(n).to("meta"), (1, n, 8)).saved_activation_bytes.per_sample for n in (64, 128)
    )
    assert long == 2 * short, "Q, K, V, output and log-sum-exp: linear in the length (no scores, no mask)"


class _Biased(nn.Module):
    """Attention over a projection of the input with an additive mask: learned (T5's position bias), or a
    constant."""

    def __init__(self, learned: bool) -> None:
        super().__init__()
        self.project = nn.Linear(4, 4, bias=False)
        self.bias = nn.Parameter(torch.zeros(1, 2, 8, 8), requires_grad=learned)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        heads = self.project(x.reshape(x.shape[0], 2, 8, 4))
        return F.scaled_dot_product_attention(heads, heads, heads, attn_mask=self.bias)


@pytest.mark.parametrize(
    ("module", "math_path"),
    [(_Attend(8), True), (_Biased(learned=True), True), (_Biased(learned=False), False)],
    ids=["dropout", "learned mask", "constant mask"],
)
def test_a_call_a_cpu_runs_on_its_math_path_says_so(module: nn.Module, math_path: bool) -> None:
    """As `torch._fused_sdp_choice` decides on this CPU: its flash kernel takes neither dropout nor a mask
    that takes a gradient."""
    probe = run_probe(module.to("meta"), (1, 8, 8))
    (layer,) = [layer for layer in probe.layers if layer.kind is LayerKind.ATTENTION]
    assert layer.math_path is math_path
    x = torch.randn(2, 2, 8, 4, requires_grad=True)
    learned = isinstance(module, _Biased) and module.bias.requires_grad
    mask = torch.zeros(1, 2, 8, 8, requires_grad=learned) if isinstance(module, _Biased) else None
    dropout = 0.1 if isinstance(module, _Attend) else 0.0
    fused = torch._fused_sdp_choice(x, x, x, attn_mask=mask, dropout_p=dropout)
    assert (fused == torch.nn.attention.SDPBackend.MATH.value) is math_path


def test_the_zoo_attends_fused_but_t5s_biased_self_attention_and_the_published_dropouts() -> None:
    paths = {
        model: {layer.math_path for layer in family_table(model, size).layers if layer.kind == "attention"}
        for model, size in (("tiny_gpt2", 32), ("tiny_llama", 32), ("tiny_t5", 32), ("gpt2", 128))
    }
    assert paths == {"tiny_gpt2": {False}, "tiny_llama": {False}, "tiny_t5": {False, True}, "gpt2": {True}}


def test_the_math_path_joins_the_hash_only_where_set() -> None:
    table = family_table("tiny_t5", 32)
    unset = [layer.model_copy(update={"math_path": False}) for layer in table.layers]
    before = architecture_hash(table.input_shape, tuple(unset), (32, str(table.task)), table.training)
    fields = {"op", "kind", "inputs", "outputs", "window", "parameters"}
    assert table.training is not None
    as_before = [
        list(table.input_shape),
        [layer.model_dump(mode="json", include=fields) for layer in unset],
        [32, str(table.task)],
        table.training.model_dump(mode="json", exclude={"hybrid_shard"}),
    ]
    old = hashlib.sha256(json.dumps(as_before, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert before == old != table.architecture_hash


class _Branches(nn.Module):
    """Sigmoids of the scaled input: four the forward drops, then the one it returns."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(4):
            torch.sigmoid(x * self.scale)
        return torch.sigmoid(x * self.scale)


def test_every_storage_the_forward_saves_counts_once() -> None:
    # 8 floats a sample: the input, which every product saves (one storage), and each sigmoid's output
    saved = run_probe(_Branches().to("meta"), (8, 1, 1)).saved_activation_bytes
    assert (saved.per_sample, saved.fixed) == (4 * 8 * (1 + 5), 0)


def test_a_models_saved_bytes_do_not_depend_on_what_the_process_probed_before() -> None:
    # The saved storages are keyed by address: one a dropped branch freed was taken by a later one,
    # whichever the heap handed out (tiny_vit's differed by 3.5% with the models probed before it).
    found = []
    for before in ("tiny_gpt2", "tiny_bert", None):
        if before is not None:
            family_table(before, 32)
        clear_cache()
        found.append(family_table("tiny_vit", 32).totals.saved_activation_bytes)
        clear_cache()
    assert found[0] == found[1] == found[2]


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models") / "my-gpt"
    folder.mkdir()
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], **TINY_GPT2}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_a_folder_with_a_config_json_is_built_with_its_task_and_token_inputs(gpt2_folder: Path) -> None:
    table = introspect(f"hf:{gpt2_folder}", kwargs={}, allow_factories=True, given=TaskInput(16))
    assert table.task == "causal-lm" and table.sequence_length == 16
    # wte 101x64 + wpe 64x64 + 2 blocks of (2 LN + qkv 64x192+192 + proj 64x64+64 + fc 64x256+256
    # + proj 256x64+64) + final LN; the head is tied to wte
    block = 2 * 128 + (64 * 192 + 192) + (64 * 64 + 64) + (64 * 256 + 256) + (256 * 64 + 64)
    assert table.totals.parameters == 101 * 64 + 64 * 64 + 2 * block + 128
    kinds = {layer.kind for layer in table.layers}
    assert {LayerKind.EMBEDDING, LayerKind.ATTENTION, LayerKind.LAYER_NORM, LayerKind.LINEAR} <= kinds


def test_the_users_cache_is_found_from_their_environment(gpt2_folder: Path, tmp_path: Path) -> None:
    snapshot = tmp_path / "hf" / "hub" / "models--acme--tiny-gpt" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text((gpt2_folder / "config.json").read_text(), encoding="utf-8")
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("abc123", encoding="ascii")
    described = JobDescription(model="hf:acme/tiny-gpt", sequence_length=8, global_batch=4, steps=10)
    table = table_for(described, allow_factories=True, environ={"HF_HOME": str(tmp_path / "hf")})
    assert table.totals.parameters > 0 and table.sequence_length == 8
    with pytest.raises(IntrospectionError, match="Hugging Face cache"):
        table_for(described, allow_factories=True, environ={"HF_HOME": str(tmp_path / "elsewhere")})


def test_the_daemon_reads_no_users_folder_only_the_shipped_table(gpt2_folder: Path) -> None:
    with pytest.raises(IntrospectionError, match="table of well-known architectures"):
        introspect(f"hf:{gpt2_folder}", allow_factories=False, given=TaskInput(16))


def test_shipped_architectures_have_their_published_sizes_and_nothing_touches_the_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("introspection tried the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    gpt2 = introspect("hf:gpt2", allow_factories=False, given=TaskInput(128))
    assert gpt2.totals.parameters == 124_439_808
    llama = introspect("hf:meta-llama/Llama-3.2-1B", allow_factories=False, given=TaskInput(128))
    assert llama.totals.parameters == 1_235_814_400
    norms = [layer for layer in llama.layers if layer.kind is LayerKind.LAYER_NORM]
    assert len(norms) == 2 * 16 + 1 and norms[0].op == "LlamaRMSNorm", "RMSNorm is a norm, not a pooling"
    vit = introspect("timm:vit_small_patch16_224", (3, 224, 224), allow_factories=False)
    assert vit.totals.parameters == 22_050_664 and vit.sequence_length is None


def test_a_token_model_without_a_length_and_a_missing_package_say_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(IntrospectionError, match="--sequence-length"):
        introspect("hf:gpt2", kwargs={"n_layer": 1}, allow_factories=False)
    monkeypatch.setitem(sys.modules, "timm", None)
    with pytest.raises(IntrospectionError, match=f"^{MISSING.replace('[', '.').replace(']', '.')}$"):
        introspect("timm:resnet18", kwargs={"drop_rate": 0.5}, allow_factories=False)


def test_a_length_past_a_learned_position_table_is_refused_and_rotary_or_relative_take_any() -> None:
    """BERT holds 512 positions and GPT-2 1024 (their configurations' max_position_embeddings): a longer
    input fails the job's first step, so it is not predicted. Llama's rotary and T5's relative positions
    have no such table."""
    for reference, limit in (("hf:bert-base-uncased", 512), ("hf:gpt2", 1024)):
        within = introspect(reference, allow_factories=False, given=TaskInput(sequence_length=limit))
        assert within.sequence_length == limit
        with pytest.raises(IntrospectionError, match=f"reads at most {limit} tokens .*not {2 * limit}"):
            introspect(reference, allow_factories=False, given=TaskInput(sequence_length=2 * limit))
    for reference in ("hf:t5-small", "hf:llama-3.2-1b"):
        assert introspect(reference, allow_factories=False, given=TaskInput(sequence_length=4096)).layers


def test_without_transformers_an_hf_model_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the user's process the build stops at one line; the daemon does not try, and says why."""
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(IntrospectionError, match=f"^{MISSING.replace('[', '.').replace(']', '.')}$"):
        introspect("hf:gpt2", kwargs={"n_layer": 3}, allow_factories=False, given=TaskInput(16))
    description = JobDescription(model="hf:gpt2", global_batch=8, steps=10, sequence_length=16)
    assert daemon_table(description, None) is None
    assert not_built_here("hf:gpt2") == "hf:gpt2 needs advisor[models] beside the daemon, which lacks it"


def test_the_daemon_builds_library_models_and_leaves_the_users_own_to_them(tmp_path: Path) -> None:
    shipped = JobDescription(model="hf:gpt2", model_kwargs={"n_layer": 1}, global_batch=8, steps=1,
                             sequence_length=16)  # fmt: skip
    table = daemon_table(shipped, None)
    assert table is not None and table.reference == "hf:gpt2" and not_built_here("hf:gpt2") is None
    folder = JobDescription(model=f"hf:{tmp_path}", global_batch=8, steps=1, sequence_length=16)
    assert daemon_table(folder, None) is None, "a user's folder is never read by the daemon"
    assert "read in your own process" in (not_built_here(folder.model) or "")
    assert not_built_here("lab.nets:lm") == "lab.nets:lm is your own code and was not run here"
    assert not_built_here("resnet50") is None and not_built_here("timm:resnet50") is None
