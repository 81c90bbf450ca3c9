"""`advisor compress` and `advisor decompress`: shared-curve weight compression from the command line.

torch is imported by the handlers, so other commands start without it.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor.settings.validated import Settings


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    compress = commands.add_parser("compress", help="store dense-layer weights as indices on a shared curve")
    compress.add_argument("checkpoint", type=Path, help="a PyTorch state dict (loaded with weights_only)")
    compress.add_argument("--out", type=Path, required=True, help="the compressed file to write")
    compress.add_argument("--layers", choices=("linear", "linear+conv"), default="linear")
    compress.add_argument(
        "--prune", type=_non_negative, default=0.0, metavar="EPS", help="zero weights within EPS row RMS of 0"
    )
    compress.add_argument(
        "--index-bits", type=_index_bits, metavar="N", help="at most 2**N levels per layer (2..16)"
    )
    compress.add_argument("--json", action="store_true", help="print the per-layer report as JSON")
    compress.set_defaults(handler=_compress)

    decompress = commands.add_parser("decompress", help="a compressed file back into a state dict")
    decompress.add_argument("file", type=Path)
    decompress.add_argument("--out", type=Path, required=True, help="the state dict to write (torch.save)")
    decompress.set_defaults(handler=_decompress)


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _index_bits(text: str) -> int:
    value = int(text)
    if not 2 <= value <= 16:
        raise argparse.ArgumentTypeError(f"must be between 2 and 16, got {text}")
    return value


def _compress(args: argparse.Namespace, console: Console) -> int:
    from advisor.compress.checkpoint import compress_state, read_checkpoint, save

    state = read_checkpoint(args.checkpoint)
    compressed = compress_state(state, args.layers, args.prune, args.index_bits)
    size = save(compressed, args.out)
    reports = compressed.reports()
    checkpoint_bytes = sum(tensor.numel() * tensor.element_size() for tensor in state.values())
    if args.json:
        print(json.dumps({"file_bytes": size, "layers": [asdict(report) for report in reports]}, indent=2))
        return 0
    table = Table(title=f"{args.checkpoint} -> {args.out}", title_justify="left")
    for header in ("layer", "shape", "bits", "bytes before", "bytes after", "ratio", "rel. error", "R^2"):
        table.add_column(header, justify="left" if header == "layer" else "right")
    for report in reports:
        table.add_row(
            report.name,
            "x".join(map(str, report.shape)),
            str(report.index_bits),
            f"{report.bytes_before:,}",
            f"{report.bytes_after:,}",
            f"{report.ratio:.1f}x",
            f"{report.error:.4f}",
            f"{report.normal_r2:.4f}",
        )
    console.print(table)
    console.print(f"file {size:,} bytes; tensors {checkpoint_bytes:,} bytes uncompressed", highlight=False)
    return 0


def _decompress(args: argparse.Namespace, console: Console) -> int:
    import torch

    from advisor.compress.checkpoint import load

    state = load(args.file)
    torch.save(state, args.out)
    console.print(f"{args.out}: {len(state)} tensors", highlight=False)
    return 0
