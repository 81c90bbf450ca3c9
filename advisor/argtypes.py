"""Argument types shared by the command lines, so each input is spelled and checked one way."""

from __future__ import annotations

import argparse


def input_shape(text: str) -> tuple[int, int, int]:
    """C,H,W (or CxHxW, as `#ADVISOR --input-shape` writes it)."""
    parts = text.replace("x", ",").split(",")
    if len(parts) != 3 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"expected C,H,W such as 3,224,224, not {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])


def count(text: str) -> int:
    """A number of things that counts from 1 (GPUs, nodes, ranks): 0 would otherwise surface later as a
    puzzle (GPUs that do not lie evenly on the nodes, a job Slurm refuses)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number such as 2, not {text!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"counts from 1, not {number}")
    return number


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


def sharding_options(parser: argparse.ArgumentParser) -> None:
    """How a job shards its state among its GPUs, so that the memory `advisor predict` shows is one GPU's."""
    parser.add_argument(
        "--zero",
        type=int,
        choices=(1, 2, 3),
        help="ZeRO stage (FSDP: FULL_SHARD is 3, SHARD_GRAD_OP 2): optimizer state, gradients, weights "
        "sharded among the job's GPUs",
    )
    parser.add_argument(
        "--hybrid-shard",
        action="store_true",
        help="with --zero: FSDP's HYBRID_SHARD, sharded among one node's GPUs, replicated across nodes",
    )
    parser.add_argument("--gpus", type=count, default=1, help="the job's GPUs in all (default 1)")
    parser.add_argument("--nodes", type=count, default=1, help="the nodes they lie on, evenly (default 1)")


def sharding_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the sharding options together (each alone was checked as it was read)."""
    if args.gpus % args.nodes:
        return f"--gpus {args.gpus} do not lie evenly on --nodes {args.nodes}"
    if args.hybrid_shard and args.zero is None:
        return "--hybrid-shard goes with --zero 2 or 3"
    return None
