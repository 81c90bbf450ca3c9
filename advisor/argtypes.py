"""Argument types shared by the command lines, so each input is spelled and checked one way."""

from __future__ import annotations

import argparse


def input_shape(text: str) -> tuple[int, int, int]:
    """C,H,W (or CxHxW, as `#ADVISOR --input-shape` writes it)."""
    parts = text.replace("x", ",").split(",")
    if len(parts) != 3 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"expected C,H,W such as 3,224,224, not {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])
