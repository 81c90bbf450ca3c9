"""The training program in a command line, past its launchers, with the launchers' own options kept.

Launchers: ``srun``, ``torchrun``, ``python -m torch.distributed.run``, ``accelerate launch``,
``deepspeed``, ``python [-u] [-m module]``; TRL's command (``trl sft --config recipe.yaml``) is its own
program. What a launcher says about the processes and precision (``--nproc_per_node``, ``--nnodes``,
``--num_processes``, ``--num_machines``, ``--mixed_precision``, ``--config_file``) is kept by name,
``-``/``_`` spellings as one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_LAUNCHERS = frozenset({"srun", "torchrun", "accelerate", "deepspeed"})
_BARE_SWITCHES = frozenset(
    {
        *("-u", "-O", "-B", "--standalone", "--multi_gpu", "--multi-gpu"),
        *("--use_deepspeed", "--use-deepspeed", "--use_fsdp", "--use-fsdp"),
    }
)
_ACCELERATE_KEYS = {
    "fsdp-sharding-strategy": "accelerate.fsdp-config.fsdp-sharding-strategy",
    "zero-stage": "accelerate.deepspeed-config.zero-stage",
    "deepspeed-config-file": "accelerate.deepspeed-config.deepspeed-config-file",
}
"""``accelerate launch``'s own options under the names its config file's keys are read by."""
_TRL_COMMANDS = frozenset({"sft", "dpo", "grpo", "kto", "reward", "rloo"})


@dataclass(frozen=True)
class Launch:
    """The program (a script's file name, ``-m`` module, or ``trl sft``), its arguments, and what the
    launchers before it were told."""

    program: str
    arguments: list[str]
    launcher: dict[str, str] = field(default_factory=dict)


def program_of(words: Sequence[str]) -> Launch | None:
    """The training program of a command line; None for a line that runs no Python."""
    launcher: dict[str, str] = {}
    index, saw_python = 0, False
    while index < len(words):
        word = words[index]
        base = word.rsplit("/", 1)[-1]
        if base == "trl" and index + 1 < len(words) and words[index + 1] in _TRL_COMMANDS:
            return Launch(f"trl {words[index + 1]}", list(words[index + 2 :]), launcher)
        if base in _LAUNCHERS or (base == "launch" and index > 0):
            index = _launcher_options(words, index + 1, launcher)
            continue
        if base.startswith("python"):
            saw_python, index = True, _launcher_options(words, index + 1, {})
            if index < len(words) and words[index] == "-m":
                module = words[index + 1] if index + 1 < len(words) else ""
                index += 2
                if module == "torch.distributed.run":
                    index = _launcher_options(words, index, launcher)
                    continue
                return Launch(module, list(words[index:]), launcher)
            continue
        if word.endswith(".py"):
            return Launch(base, list(words[index + 1 :]), launcher)
        return Launch(base, list(words[index + 1 :]), launcher) if saw_python else None
    return None


def _launcher_options(words: Sequence[str], index: int, kept: dict[str, str]) -> int:
    """Past a launcher's own options (``--nproc_per_node=4``, ``-u``, ``--nnodes 2``), keeping each."""
    while index < len(words) and words[index].startswith("-"):
        word = words[index]
        index += 1
        name, has_value, value = word.partition("=")
        if not has_value and word not in _BARE_SWITCHES and index < len(words):
            following = words[index]
            if not following.endswith(".py") and not following.startswith("-"):
                value = following
                index += 1
        kept[name.lstrip("-").replace("_", "-")] = value
    return index


def accelerate_flags(launcher: Mapping[str, str]) -> dict[str, str]:
    """What ``accelerate launch`` was told on its command line, keyed as its config file's settings are
    (``accelerate.``): ``--use_fsdp``, ``--fsdp_sharding_strategy``, ``--zero_stage``, so that a job
    configured either way reads alike."""
    found = {_ACCELERATE_KEYS[name]: value for name, value in launcher.items() if name in _ACCELERATE_KEYS}
    if "use-fsdp" in launcher:
        found["accelerate.distributed-type"] = "FSDP"
    return found
