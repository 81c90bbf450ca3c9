"""A self-describing container of named arrays, safe to read from untrusted files (no pickle).

Layout: magic (8 bytes), version (u16), header length (u32), payload length (u64), JSON header, payload,
SHA-256 of everything before it. The lengths come first so truncation is told apart from corruption, and
the checksum is checked before the header is parsed.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MAGIC = b"\x89ADVCMP\n"
VERSION = 1
_PREFIX = struct.Struct("<8sHIQ")
_DIGEST = 32
_DTYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32"}
    | {"float64"}
)


class CompressedFileError(ValueError):
    """A file that cannot be read back; the message names the file and what is wrong with it."""


def write_container(path: Path, meta: Mapping[str, Any], arrays: Mapping[str, npt.NDArray[Any]]) -> int:
    """Writes atomically (temporary file, then rename); returns the file's size in bytes."""
    entries: dict[str, dict[str, Any]] = {}
    chunks: list[bytes] = []
    offset = 0
    for name, array in arrays.items():
        if array.dtype.name not in _DTYPES:
            raise ValueError(f"{name}: dtype {array.dtype} cannot be stored")
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        entries[name] = {"dtype": array.dtype.name, "shape": list(array.shape), "offset": offset}
        chunks.append(data)
        offset += len(data)
    header = json.dumps({"meta": meta, "arrays": entries}, separators=(",", ":")).encode()
    body = _PREFIX.pack(MAGIC, VERSION, len(header), offset) + header + b"".join(chunks)
    blob = body + hashlib.sha256(body).digest()
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(blob)
    temporary.replace(path)
    return len(blob)


def read_container(path: Path) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    blob = path.read_bytes()
    if len(blob) < len(MAGIC) or blob[: len(MAGIC)] != MAGIC:
        raise CompressedFileError(f"{path}: not a compressed-weights file (wrong magic bytes)")
    if len(blob) < _PREFIX.size:
        raise CompressedFileError(f"{path}: truncated: {len(blob)} bytes, shorter than the fixed prefix")
    _, version, header_len, payload_len = _PREFIX.unpack_from(blob)
    if version != VERSION:
        raise CompressedFileError(f"{path}: format version {version} is not supported (this reads {VERSION})")
    expected = _PREFIX.size + header_len + payload_len + _DIGEST
    if len(blob) < expected:
        raise CompressedFileError(f"{path}: truncated: {len(blob)} bytes, the header announces {expected}")
    if len(blob) > expected:
        raise CompressedFileError(f"{path}: corrupted: {len(blob) - expected} bytes after the checksum")
    body, digest = blob[:-_DIGEST], blob[-_DIGEST:]
    if hashlib.sha256(body).digest() != digest:
        raise CompressedFileError(f"{path}: corrupted: checksum mismatch")
    try:
        header = json.loads(body[_PREFIX.size : _PREFIX.size + header_len])
        return dict(header["meta"]), _arrays(
            path, header["arrays"], memoryview(body)[_PREFIX.size + header_len :]
        )
    except (ValueError, KeyError, TypeError) as error:
        if isinstance(error, CompressedFileError):
            raise
        raise CompressedFileError(f"{path}: malformed header: {error}") from error


def _arrays(path: Path, entries: dict[str, Any], payload: memoryview) -> dict[str, npt.NDArray[Any]]:
    arrays: dict[str, npt.NDArray[Any]] = {}
    for name, entry in entries.items():
        if entry["dtype"] not in _DTYPES:
            raise CompressedFileError(f"{path}: array {name} has unsupported dtype {entry['dtype']}")
        dtype = np.dtype(entry["dtype"]).newbyteorder("<")
        count = int(np.prod(entry["shape"], dtype=np.int64))
        start = int(entry["offset"])
        if start < 0 or start + count * dtype.itemsize > len(payload):
            raise CompressedFileError(f"{path}: array {name} lies outside the payload")
        flat = np.frombuffer(payload, dtype=dtype, count=count, offset=start)
        arrays[name] = flat.astype(dtype.newbyteorder("="), copy=True).reshape(entry["shape"])
    return arrays


def pack_bits(values: npt.NDArray[np.uint32], width: int) -> npt.NDArray[np.uint8]:
    """Unsigned integers below 2**width as one big-endian bit stream."""
    shifts = np.arange(width - 1, -1, -1, dtype=np.uint32)
    bits = ((values.reshape(-1, 1) >> shifts) & 1).astype(np.uint8)
    return np.packbits(bits.reshape(-1))


def unpack_bits(packed: npt.NDArray[np.uint8], width: int, count: int) -> npt.NDArray[np.uint32]:
    if len(packed) * 8 < count * width:
        raise ValueError(f"{len(packed)} bytes cannot hold {count} values of {width} bits")
    bits = np.unpackbits(packed, count=count * width).reshape(count, width).astype(np.uint64)
    weights = np.uint64(1) << np.arange(width - 1, -1, -1, dtype=np.uint64)
    return (bits @ weights).astype(np.uint32)
