"""Compressing a model's state dict into one file, and reading it back into a model.

A layer is chosen from the state dict alone: a floating `*.weight` with 2 dimensions is a dense layer
(`linear`), one with 3 to 5 a convolution (rows are output channels). Every other tensor is stored as it is,
so the file replaces the checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch

from advisor.compress.curve import CompressedMatrix, compress_matrix, relative_error
from advisor.compress.fileformat import (
    CompressedFileError,
    pack_bits,
    read_container,
    unpack_bits,
    write_container,
)

LayerKinds = Literal["linear", "linear+conv"]
_FORMAT = "advisor.compress/shared-curve"


@dataclass(frozen=True)
class LayerReport:
    name: str
    kind: str
    shape: tuple[int, ...]
    bytes_before: int
    bytes_after: int
    error: float
    normal_r2: float
    index_bits: int
    shifted: bool

    @property
    def ratio(self) -> float:
        return self.bytes_before / self.bytes_after


@dataclass(frozen=True)
class CompressedModel:
    layers: dict[str, tuple[LayerReport, CompressedMatrix]]
    others: dict[str, torch.Tensor]
    prune_eps: float
    index_bits: int | None

    def reports(self) -> list[LayerReport]:
        return [report for report, _ in self.layers.values()]


def read_checkpoint(path: Path) -> dict[str, torch.Tensor]:
    """A state dict, or a dict holding one under `state_dict` or `model`; loaded without pickle code."""
    loaded = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(loaded, Mapping):
        for key in ("state_dict", "model"):
            if isinstance(loaded.get(key), Mapping):
                loaded = loaded[key]
                break
    if not isinstance(loaded, Mapping) or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
        raise ValueError(f"{path}: not a state dict of tensors")
    return {str(name): tensor for name, tensor in loaded.items()}


def layer_kind(name: str, tensor: torch.Tensor) -> str | None:
    if not name.endswith("weight") or not tensor.is_floating_point() or tensor.shape[0] == 0:
        return None
    cols = tensor[0].numel()
    if tensor.ndim == 2 and cols >= 2:
        return "linear"
    if 3 <= tensor.ndim <= 5 and cols >= 2:
        return "conv"
    return None


def compress_state(
    state: Mapping[str, torch.Tensor],
    layers: LayerKinds = "linear",
    prune_eps: float = 0.0,
    index_bits: int | None = None,
) -> CompressedModel:
    wanted = {"linear"} if layers == "linear" else {"linear", "conv"}
    compressed: dict[str, tuple[LayerReport, CompressedMatrix]] = {}
    others: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        kind = layer_kind(name, tensor)
        if kind not in wanted:
            others[name] = tensor.detach().cpu()
            continue
        matrix = tensor.detach().cpu().to(torch.float64).reshape(tensor.shape[0], -1).numpy()
        result = compress_matrix(matrix, prune_eps, index_bits)
        report = LayerReport(
            name=name,
            kind=str(kind),
            shape=tuple(tensor.shape),
            bytes_before=4 * tensor.numel(),
            bytes_after=result.nbytes,
            error=relative_error(matrix, result),
            normal_r2=result.normal_r2,
            index_bits=result.index_bits,
            shifted=result.shift is not None,
        )
        compressed[name] = (report, result)
    return CompressedModel(compressed, others, prune_eps, index_bits)


def save(model: CompressedModel, path: Path) -> int:
    """Writes the file; returns its size in bytes."""
    arrays: dict[str, npt.NDArray[Any]] = {}
    layers: dict[str, dict[str, Any]] = {}
    for name, (report, matrix) in model.layers.items():
        arrays[f"{name}#levels"] = matrix.levels
        arrays[f"{name}#indices"] = pack_bits(matrix.indices, matrix.index_bits)
        arrays[f"{name}#scale"] = matrix.scale
        if matrix.shift is not None:
            arrays[f"{name}#shift"] = matrix.shift
        layers[name] = {
            "shape": list(report.shape),
            "kind": report.kind,
            "bits": report.index_bits,
            "error": report.error,
            "normal_r2": report.normal_r2,
        }
    dtypes: dict[str, str] = {}
    for name, tensor in model.others.items():
        dtypes[name] = str(tensor.dtype).removeprefix("torch.")
        widened = tensor.float() if tensor.dtype == torch.bfloat16 else tensor
        arrays[name] = widened.numpy()
    meta = {
        "format": _FORMAT,
        "prune_eps": model.prune_eps,
        "index_bits": model.index_bits,
        "layers": layers,
        "dtypes": dtypes,
    }
    return write_container(path, meta, arrays)


def load(path: Path) -> dict[str, torch.Tensor]:
    """The state dict a compressed file stands for, ready for `model.load_state_dict`."""
    meta, arrays = read_container(path)
    if meta.get("format") != _FORMAT:
        raise CompressedFileError(f"{path}: unknown content {meta.get('format')!r}")
    try:
        state = {name: _layer(arrays, name, spec) for name, spec in meta["layers"].items()}
        for name, dtype_name in meta["dtypes"].items():
            dtype = getattr(torch, str(dtype_name), None)
            if not isinstance(dtype, torch.dtype):
                raise ValueError(f"{name}: unknown dtype {dtype_name!r}")
            state[name] = torch.from_numpy(arrays[name]).to(dtype)
    except (KeyError, ValueError, TypeError, AttributeError) as error:
        raise CompressedFileError(f"{path}: inconsistent content: {error!r}") from error
    return state


def load_into(module: torch.nn.Module, path: Path) -> None:
    module.load_state_dict(load(path))


def matrix_from(
    arrays: Mapping[str, npt.NDArray[Any]], name: str, spec: Mapping[str, Any]
) -> CompressedMatrix:
    shape = [int(size) for size in spec["shape"]]
    rows, cols = shape[0], int(np.prod(shape[1:]))
    levels = arrays[f"{name}#levels"]
    indices = unpack_bits(arrays[f"{name}#indices"], int(spec["bits"]), rows * cols).reshape(rows, cols)
    if indices.size and int(indices.max()) >= len(levels):
        raise ValueError(f"{name}: level index {int(indices.max())} beyond {len(levels)} levels")
    return CompressedMatrix(
        levels=levels,
        indices=indices,
        scale=arrays[f"{name}#scale"],
        shift=arrays.get(f"{name}#shift"),
        normal_r2=float(spec["normal_r2"]),
    )


def _layer(arrays: Mapping[str, npt.NDArray[Any]], name: str, spec: Mapping[str, Any]) -> torch.Tensor:
    weights = matrix_from(arrays, name, spec).weights()
    return torch.from_numpy(weights).reshape([int(size) for size in spec["shape"]])
