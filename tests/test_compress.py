"""Shared-curve weight compression: exact permutations, bounded error, a file format that refuses damage."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from rich.console import Console
from torch import nn

from advisor.compress import cli
from advisor.compress.checkpoint import compress_state, load, load_into, matrix_from, save
from advisor.compress.curve import (
    compress_matrix,
    estimated_nbytes,
    level_map,
    ranks,
    reference_curve,
    relative_error,
)
from advisor.compress.estimate import dense_layers, render_savings
from advisor.compress.fileformat import CompressedFileError, pack_bits, read_container, unpack_bits
from advisor.introspect.run import introspect
from advisor.settings import load_settings

torch.set_num_threads(1)


def _weights(rows: int = 48, cols: int = 64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 0.05, size=(rows, cols)) * rng.uniform(0.5, 2.0, size=(rows, 1))


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(4 * 6 * 6, 64), nn.ReLU(), nn.Linear(64, 32)
    )


def test_without_pruning_the_indices_are_each_rows_exact_permutation() -> None:
    weights = _weights()
    compressed = compress_matrix(weights)
    assert np.array_equal(compressed.indices, ranks(weights))
    assert all(sorted(row) == list(range(64)) for row in compressed.indices.tolist())
    assert compressed.index_bits == 6


def test_gaussian_rows_reconstruct_within_the_stated_error_and_match_a_normal_curve() -> None:
    weights = _weights()
    compressed = compress_matrix(weights)
    error = relative_error(weights, compressed)
    # 64 samples per row scatter about the expected order statistics by about 13%; the curve is shared.
    assert error < 0.2
    assert np.linalg.norm(weights - compressed.weights()) <= error * np.linalg.norm(weights) * (1 + 1e-6)
    assert compressed.normal_r2 > 0.99


def test_pruning_zeroes_the_middle_of_the_curve_and_shrinks_the_index_range() -> None:
    weights = _weights(cols=256)
    curve = reference_curve(weights, shifted=False)
    mapping, values = level_map(curve, prune_eps=0.5, index_bits=None)
    pruned = np.abs(curve) < 0.5
    assert np.all(values[mapping[pruned]] == 0.0)
    assert len(values) == 256 - pruned.sum() + 1
    assert np.all(np.diff(values) > 0)
    assert compress_matrix(weights, prune_eps=1.0).index_bits < compress_matrix(weights).index_bits


def test_index_bits_caps_the_levels_and_error_grows_as_bits_fall() -> None:
    weights = _weights(cols=128)
    errors = []
    for bits in (7, 4, 2):
        compressed = compress_matrix(weights, index_bits=bits)
        assert len(compressed.levels) <= 2**bits
        assert int(compressed.indices.max()) < 2**bits
        errors.append(relative_error(weights, compressed))
    assert errors[0] < errors[1] < errors[2]


def test_bit_packing_round_trips() -> None:
    values = np.random.default_rng(1).integers(0, 2**5, size=1001).astype(np.uint32)
    packed = pack_bits(values, 5)
    assert len(packed) == (1001 * 5 + 7) // 8
    assert np.array_equal(unpack_bits(packed, 5, 1001), values)


def test_file_round_trip_restores_indices_and_weights_within_the_reported_error(tmp_path: Path) -> None:
    model = _model()
    state = model.state_dict()
    compressed = compress_state(state, "linear+conv", prune_eps=0.1, index_bits=5)
    path = tmp_path / "model.advc"
    size = save(compressed, path)
    assert size == path.stat().st_size
    restored = load(path)
    assert set(restored) == set(state)
    for report, matrix in compressed.layers.values():
        meta, arrays = read_container(path)
        reread = matrix_from(arrays, report.name, meta["layers"][report.name])
        assert np.array_equal(reread.indices, matrix.indices)
        original = state[report.name].double()
        difference = torch.linalg.norm(original - restored[report.name].double())
        assert difference <= report.error * torch.linalg.norm(original) * (1 + 1e-5)
        assert report.kind == "conv" or report.ratio > 4
    assert torch.equal(restored["2.bias"], state["2.bias"])
    load_into(_model(), path)


def test_linear_choice_leaves_convolutions_untouched(tmp_path: Path) -> None:
    state = _model().state_dict()
    compressed = compress_state(state, "linear")
    assert sorted(compressed.layers) == ["2.weight", "4.weight"]
    save(compressed, tmp_path / "m.advc")
    assert torch.equal(load(tmp_path / "m.advc")["0.weight"], state["0.weight"])


def test_a_file_written_by_one_process_loads_in_another(tmp_path: Path) -> None:
    checkpoint, out = tmp_path / "model.pt", tmp_path / "model.advc"
    torch.save(_model().state_dict(), checkpoint)
    writer = textwrap.dedent(f"""
        from advisor.cli import main
        argv = ["compress", {str(checkpoint)!r}, "--out", {str(out)!r}, "--index-bits", "4"]
        raise SystemExit(main(argv))
    """)
    subprocess.run([sys.executable, "-c", writer], check=True, capture_output=True, timeout=120)
    expected = compress_state(torch.load(checkpoint, weights_only=True), "linear", 0.0, 4)
    restored = load(out)
    for name, (_, matrix) in expected.layers.items():
        assert torch.allclose(
            restored[name], torch.from_numpy(matrix.weights()).reshape(restored[name].shape)
        )


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "model.advc"
    save(compress_state(_model().state_dict(), "linear", 0.0, 4), path)
    return path


def test_truncated_file_is_named_and_called_truncated(saved: Path) -> None:
    saved.write_bytes(saved.read_bytes()[:-100])
    with pytest.raises(CompressedFileError, match=rf"{saved.name}: truncated"):
        load(saved)


def test_flipped_byte_is_reported_as_a_checksum_mismatch(saved: Path) -> None:
    blob = bytearray(saved.read_bytes())
    blob[len(blob) // 2] ^= 0x40
    saved.write_bytes(bytes(blob))
    with pytest.raises(CompressedFileError, match=rf"{saved.name}: corrupted: checksum mismatch"):
        load(saved)


def test_other_files_are_refused_by_their_magic_bytes(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.save(_model().state_dict(), path)
    with pytest.raises(CompressedFileError, match="not a compressed-weights file"):
        load(path)


def test_cli_reports_each_layer_and_writes_a_loadable_file(tmp_path: Path) -> None:
    checkpoint, out = tmp_path / "model.pt", tmp_path / "model.advc"
    torch.save({"state_dict": _model().state_dict()}, checkpoint)
    parser = argparse.ArgumentParser()
    cli.add_commands(parser.add_subparsers(), load_settings(os.environ))
    console = Console(record=True, width=200)
    args = parser.parse_args(["compress", str(checkpoint), "--out", str(out), "--prune", "0.2"])
    assert args.handler(args, console) == 0
    text = console.export_text()
    assert "2.weight" in text and "4.weight" in text and "0.weight" not in text
    with pytest.raises(SystemExit):
        parser.parse_args(["compress", str(checkpoint), "--out", str(out), "--index-bits", "1"])
    back = tmp_path / "back.pt"
    args = parser.parse_args(["decompress", str(out), "--out", str(back)])
    assert args.handler(args, console) == 0
    assert set(torch.load(back, weights_only=True)) == set(_model().state_dict())


def test_shape_only_estimate_matches_the_real_size_without_pruning() -> None:
    weights = _weights(rows=40, cols=100)
    for bits in (None, 5, 3):
        compressed = compress_matrix(weights, index_bits=bits)
        shifted = compressed.shift is not None
        assert estimated_nbytes(40, 100, bits, shifted) == compressed.nbytes


def test_inspect_savings_list_each_dense_layer_once() -> None:
    table = introspect("tests.factories.cnn:build", (3, 16, 16), {"width": 32}, allow_factories=True)
    layers = dense_layers(table)
    assert [(layer.name, layer.rows, layer.cols) for layer in layers] == [("head", 10, 32)]
    console = Console(record=True, width=200)
    render_savings(table, console)
    shown = console.export_text()
    assert "1.25 KiB" in shown, shown  # 10 x 32 float32 weights: 1,280 bytes
    assert "1,280" not in shown  # sizes in binary units, not raw byte counts
