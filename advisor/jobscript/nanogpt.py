"""nanoGPT's ``train.py`` (karpathy/nanoGPT): ``python train.py config/train_gpt2.py --batch_size=12``, its
settings the module's own globals, overridden by the config file (Python assignments) and then by
``--key=value``.

The config is read as text, never run: each ``name = literal`` assignment (``5 * 8`` too), nothing else
(`config_assignments`). Its defaults are train.py's: GPT-2 124M (12 layers, 12 heads, 768 wide) over 1,024
tokens, 12 sequences a micro-batch, 40 accumulated in all (``gradient_accumulation_steps`` counts every GPU's,
train.py divides it by the world size), 600,000 iterations, bfloat16, AdamW. Its vocabulary is GPT-2's padded
to 50,304, or the character set of the dataset it names (shakespeare_char: 65); ``init_from='gpt2-xl'``
fine-tunes that model. A named config that cannot be read here leaves the job undescribed, named.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from advisor.jobscript.arguments import counts
from advisor.jobscript.launchers import UNKNOWN, AtRunTime
from advisor.jobscript.trainers import FOLLOWS_ITS_OWN, Undescribed

_DEFAULTS = {
    "batch-size": "12", "block-size": "1024", "n-layer": "12", "n-head": "12", "n-embd": "768",
    "gradient-accumulation-steps": "40", "max-iters": "600000", "dtype": "bfloat16", "init-from": "scratch",
    "dataset": "openwebtext",
}  # fmt: skip
_SIZES = (
    "batch-size", "block-size", "n-layer", "n-head", "n-embd", "gradient-accumulation-steps", "max-iters",
)  # fmt: skip
_KEYS = frozenset({"n-layer", "n-head", "n-embd", "max-iters", "init-from"})
"""Settings only nanoGPT's train.py (and programs grown from it) has; a Hugging Face script's ``--block_size``
is not one."""
_VOCABULARY = 50304
"""GPT-2's 50,257 tokens padded to a multiple of 64, as train.py builds its model from scratch."""
_CHARACTERS = {"shakespeare_char": 65}
"""The character-level datasets' vocabularies (their meta.pkl's vocab_size)."""
_PRETRAINED = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")
_CONFIG = re.compile(r"(^|/)config/(train|finetune|eval)_[\w-]+\.py$")


def nanogpt_style(program: str, flags: Mapping[str, str], positional: list[str]) -> bool:
    """train.py with nanoGPT's own settings (from its config or the command line), or its config folder's
    file as its argument (``config/train_gpt2.py``: mmdetection's train.py takes ``configs/*.py``)."""
    config = bool(positional) and _CONFIG.search(positional[0]) is not None
    return program == "train.py" and (config or bool(_KEYS & flags.keys()))


def read_nanogpt(
    flags: Mapping[str, str], positional: list[str], unread: list[str], world: int
) -> dict[str, Any] | None:
    """The job's values from train.py's defaults, the config's assignments and the flags (``flags``: the
    config's and the command line's, merged, the command line's winning)."""
    config = positional[0] if positional and positional[0].endswith(".py") else None
    if config is not None and config in {name.split(" ")[0] for name in unread}:
        raise Undescribed(f"nanoGPT's config {config} could not be read here: its settings size the job")
    settings = _DEFAULTS | {key: value.strip("'\"") for key, value in flags.items()}
    if any(UNKNOWN in settings[key] for key in _SIZES):
        raise AtRunTime("nanogpt")
    if not counts(*(settings[key] for key in _SIZES)):
        return None
    accumulation, left = divmod(int(settings["gradient-accumulation-steps"]), world)
    if accumulation < 1 or left:
        return None
    batch, block, origin = int(settings["batch-size"]), int(settings["block-size"]), settings["init-from"]
    return {
        "model": f"hf:{origin if origin in _PRETRAINED else 'gpt2'}",
        "model_kwargs": _shape(settings, block),
        "task": "causal-lm",
        "sequence_length": str(block),
        "global_batch": str(batch * accumulation * world),
        "steps": settings["max-iters"],
        "optimizer": "adamw",
        "own_amp": settings["dtype"] in ("bfloat16", "float16"),
        "own_accumulation": str(accumulation),
    } | FOLLOWS_ITS_OWN


def _shape(settings: Mapping[str, str], block: int) -> dict[str, Any]:
    """The GPT's configuration: GPT-2's published one cropped to the block where it fine-tunes one, else
    its own depth, heads, width and vocabulary."""
    if settings["init-from"] in _PRETRAINED:
        return {"n_positions": block}
    return {
        "n_positions": block,
        "n_layer": int(settings["n-layer"]),
        "n_head": int(settings["n-head"]),
        "n_embd": int(settings["n-embd"]),
        "vocab_size": _CHARACTERS.get(settings["dataset"], _VOCABULARY),
    }


_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
}  # fmt: skip


def config_assignments(text: str) -> dict[str, Any]:
    """A Python config's ``name = value`` lines whose value is a literal or integer arithmetic on literals;
    the rest (imports, calls, conditions) left out. Nothing is run."""
    try:
        module = ast.parse(text)
    except SyntaxError as error:
        raise ValueError(f"line {error.lineno}: not Python") from None
    except RecursionError:
        raise ValueError("nested too deep to read") from None
    found: dict[str, Any] = {}
    for statement in module.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            value = _literal(statement.value)
            if isinstance(target, ast.Name) and value is not None:
                found[target.id] = value
    return found


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _literal(node.left), _literal(node.right)
        numbers = isinstance(left, int) and isinstance(right, int) and not isinstance(left, bool)
        return _OPERATORS[type(node.op)](left, right) if numbers and right != 0 else None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None
