"""Argument types shared by the command lines, so each input is spelled and checked one way."""

from __future__ import annotations

import argparse


def input_shape(text: str) -> tuple[int, int, int]:
    """C,H,W (or CxHxW, as `#ADVISOR --input-shape` writes it)."""
    parts = text.replace("x", ",").split(",")
    if len(parts) != 3 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"expected C,H,W such as 3,224,224, not {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])


def model_arg(text: str) -> tuple[str, int | float | bool | str]:
    """KEY=VALUE for the model's constructor, as `#ADVISOR --model-arg` takes it: a JSON number or boolean,
    otherwise the text itself."""
    # Imported where the option is given, so that `advisor --help` stays light.
    from advisor.jobscript.advisor_words import keyword_value

    key, has_value, value = text.partition("=")
    if not has_value or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE such as dropout=0.1, not {text!r}")
    return key, keyword_value(value)


def model_options(parser: argparse.ArgumentParser) -> None:
    """What builds the model besides its name, as `#ADVISOR` says it: the constructor's keywords, and a
    token model's sequence and loss (`advisor predict` and `advisor inspect` alike)."""
    parser.add_argument(
        "--model-arg",
        type=model_arg,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a keyword for the model's constructor, as #ADVISOR --model-arg (repeat for more)",
    )
    parser.add_argument("--sequence-length", type=int, help="a token model's sequence (hf:, timm: text)")
    parser.add_argument("--task", help="a token model's loss: causal-lm, masked-lm, sequence-classification")


def add_plan_choice(parser: argparse.ArgumentParser) -> argparse._MutuallyExclusiveGroup:
    """``--quick`` or ``--check`` instead of the nightly plan: the one spelling of every command's choice
    (the group, for a command's own further choices)."""
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--quick", action="store_true", help="a few small models: minutes, not hours")
    kind.add_argument(
        "--check",
        action="store_true",
        help="every part of the nightly plan, thinly (both input sizes, each setting, layers): minutes",
    )
    return kind
