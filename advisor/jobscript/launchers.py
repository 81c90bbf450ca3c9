"""The training program in a command line, past its launchers, with the launchers' own options kept.

Launchers: ``srun``, ``torchrun``, ``python -m torch.distributed.run`` (or ``.launch``), ``accelerate
launch``, ``deepspeed``, Lightning Fabric's ``fabric run``, ``python [-u] [-m module]``, timm's ``[bash]
distributed_train.sh N`` (its train.py in N processes), a launcher's own ``-m module`` (``accelerate launch -m
axolotl.cli.train config.yml``); TRL's command (``trl sft --config recipe.yaml``), axolotl's (``axolotl train
config.yml``), LLaMA-Factory's (``llamafactory-cli train config.yaml``) and torchtune's (``tune run
[torchrun's options] RECIPE --config FILE``, the recipe its program) are programs of their own. What a
launcher says about the processes and precision (``--nproc_per_node``, ``--nnodes``, ``--num_processes``,
``--num_machines``, ``--mixed_precision``, ``--config_file``) is kept by name, ``-``/``_`` spellings as one;
variables set for the command alone (``CUDA_VISIBLE_DEVICES=0 python``) are passed over. A line's words come
with the script's variables in place (`words_of`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_LAUNCHERS = frozenset({"srun", "torchrun", "accelerate", "deepspeed"})
_BARE_SWITCHES = frozenset(
    {
        *("-u", "-O", "-B", "--standalone", "--multi_gpu", "--multi-gpu", "--use_env", "--use-env"),
        *("--use_deepspeed", "--use-deepspeed", "--use_fsdp", "--use-fsdp"),
    }
)
_ACCELERATE_KEYS = {
    "fsdp-sharding-strategy": "accelerate.fsdp-config.fsdp-sharding-strategy",
    "zero-stage": "accelerate.deepspeed-config.zero-stage",
    "deepspeed-config-file": "accelerate.deepspeed-config.deepspeed-config-file",
    "mixed-precision": "accelerate.mixed-precision",
}
"""``accelerate launch``'s own options under the names its config file's keys are read by."""
_TRL_COMMANDS = frozenset({"sft", "dpo", "grpo", "kto", "reward", "rloo"})
_COMMANDS = frozenset(
    {
        *(("trl", name) for name in _TRL_COMMANDS),
        ("axolotl", "train"),
        ("llamafactory-cli", "train"),
        ("lmf", "train"),
    }
)
"""Programs of two words (``trl sft``, ``axolotl train``, LLaMA-Factory's ``llamafactory-cli train``)."""
_FABRIC = frozenset({("fabric", "run"), ("lightning", "run")})
_FABRIC_OPTIONS = {"devices": "nproc-per-node", "num-nodes": "nnodes"}
"""Lightning Fabric's launcher's processes (``--devices`` a node, ``--num_nodes``), as torchrun's."""
ACCELERATE = "accelerate"
"""Kept among a launch's options where ``accelerate launch`` started it (its default config applies)."""
UNKNOWN = "\x00"
"""A word whose value the script computes at run time."""
SUBMITTED = "$SLURM_SUBMIT_DIR"
"""The folder the job is submitted from, as a path starts (``$SLURM_SUBMIT_DIR/configs/x.toml``): where
`advise-submit` runs, whatever folder the script's ``cd`` went to before (`shell.located`)."""


class AtRunTime(Exception):
    """A value the job is sized by that the script computes at run time: nothing is guessed."""


_ENVIRONMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
"""A variable set for the command alone (``CUDA_VISIBLE_DEVICES=0,1 accelerate launch ...``)."""
_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
"""``$NAME``, ``${NAME}``, and ``${NAME:-default}`` (the default where the script does not set NAME)."""
_TIMM_LAUNCHER = "distributed_train.sh"
"""timm's launcher (``./distributed_train.sh 8 /data/imagenet --model NAME ...``): its train.py in as many
processes."""
_TORCHTITAN_LAUNCHER = "run_train.sh"
"""torchtitan's launcher (``CONFIG_FILE=x.toml NGPU=8 ./run_train.sh --training.steps 10``): ``torchrun
--nproc_per_node=$NGPU -m torchtitan.train --job.config_file $CONFIG_FILE "$@"``, its defaults 8 GPUs and
its debug model's config."""
TORCHTITAN_MODULE = "torchtitan.train"
"""torchtitan's trainer, as ``python -m`` runs it."""
_TORCHTITAN_DEFAULTS = {
    "NGPU": "8",
    "CONFIG_FILE": "./torchtitan/models/llama3/train_configs/debug_model.toml",
    "TRAIN_FILE": TORCHTITAN_MODULE,
}
_SHELLS = frozenset({"bash", "sh"})
TRAINING_COMMANDS = frozenset({"fairseq-train", "fairseq-hydra-train", "litgpt", "mim", "swift", "xtuner"})
"""Training programs that are not Python files on the command line: each is named (as not read), not
passed over in silence."""
_WHOLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:\[[@*]\])?\}|([A-Za-z_][A-Za-z0-9_]*))")
"""A word that is one variable: a string's or an array's every element (``${ARGS[@]}``)."""
_MODULE = frozenset({"-m", "--module"})
"""A launcher's option whose next word is the module it runs (accelerate's, torchrun's, DeepSpeed's; srun's
``-m`` is its task distribution)."""


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
    index, saw_python, environment = 0, False, dict[str, str]()
    while index < len(words) and (words[index] == "env" or _ENVIRONMENT.fullmatch(words[index])):
        name, _, value = words[index].partition("=")
        environment[name] = value
        index += 1  # the command's own environment, before its program
    while index < len(words):
        word = words[index]
        base = word.rsplit("/", 1)[-1]
        following = words[index + 1] if index + 1 < len(words) else ""
        if (base, following) in _COMMANDS:
            return Launch(f"{base} {following}", list(words[index + 2 :]), launcher)
        if (base, following) in _FABRIC:  # ``fabric run [model]``, ``lightning run model``: a launcher
            index += 3 if words[index + 2 : index + 3] == ["model"] else 2
            options: dict[str, str] = {}
            index = _launcher_options(words, index, options)
            launcher |= {
                _FABRIC_OPTIONS[name]: value for name, value in options.items() if name in _FABRIC_OPTIONS
            }
            continue
        if (base, following) == ("tune", "run"):
            index = _launcher_options(words, index + 2, launcher)
            recipe = words[index] if index < len(words) else ""
            return Launch(f"tune run {recipe}", list(words[index + 1 :]), launcher)
        if word in _MODULE and following:
            return Launch(following, list(words[index + 2 :]), launcher)
        if base == _TORCHTITAN_LAUNCHER:
            return _torchtitan(environment, words[index + 1 :], launcher)
        if base == _TIMM_LAUNCHER and following.isdigit():  # torchrun --nproc_per_node=$1 train.py "$@"
            return Launch("train.py", list(words[index + 2 :]), {**launcher, "nproc-per-node": following})
        if base in _SHELLS and following.endswith(".sh"):
            index += 1
            continue
        if base in _LAUNCHERS or (base == "launch" and index > 0):
            launcher |= {ACCELERATE: ""} if base == "accelerate" else {}
            index = _launcher_options(words, index + 1, launcher, module=base != "srun")
            continue
        if base.startswith("python"):
            saw_python, index = True, _launcher_options(words, index + 1, {})
            if index < len(words) and words[index] == "-m":
                module = words[index + 1] if index + 1 < len(words) else ""
                index += 2
                if module in ("torch.distributed.run", "torch.distributed.launch"):
                    index = _launcher_options(words, index, launcher)
                    continue
                return Launch(module, list(words[index:]), launcher)
            continue
        if word.endswith((".py", ".sh")) or base in TRAINING_COMMANDS:  # a launcher script of its own too
            return Launch(base, list(words[index + 1 :]), launcher)
        return Launch(base, list(words[index + 1 :]), launcher) if saw_python else None
    return None


def _torchtitan(environment: Mapping[str, str], arguments: Sequence[str], launcher: dict[str, str]) -> Launch:
    """torchtitan's trainer as its ``run_train.sh`` starts it, from the variables set for the command."""
    given = {**_TORCHTITAN_DEFAULTS, **environment}
    config = ["--job.config_file", given["CONFIG_FILE"]]
    return Launch(given["TRAIN_FILE"], [*config, *arguments], {**launcher, "nproc-per-node": given["NGPU"]})


def _launcher_options(words: Sequence[str], index: int, kept: dict[str, str], module: bool = True) -> int:
    """Past a launcher's own options (``--nproc_per_node=4``, ``-u``, ``--nnodes 2``), keeping each."""
    while index < len(words) and words[index].startswith("-") and not (module and words[index] in _MODULE):
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


def expand(text: str, variables: Mapping[str, str | None]) -> str | None:
    """``$NAME`` and ``${NAME}`` replaced by what the script set them to; None where one is unknown."""
    expanded, unknown = _substituted(text, variables)
    return None if unknown or "$" in expanded.replace(SUBMITTED, "") else expanded


def expand_text(text: str, variables: Mapping[str, str | None]) -> str:
    """A text the shell expands (an unquoted here-document's): each reference the run sets, and each
    command substitution, `UNKNOWN`."""
    expanded, _ = _substituted(text, variables, UNKNOWN)
    return _SUBSTITUTION.sub(UNKNOWN, expanded)


_SUBSTITUTION = re.compile(r"\$\([^()]*(?:\([^()]*\)[^()]*)*\)|`[^`]*`|\$(?:[0-9@*#?$!-]|\{[^}]*\})")
"""``$(nproc)``, ``$((4 * 2))``, a backtick's command, ``$1``, ``$@``, ``${#ARGS[@]}``."""


def _substituted(text: str, variables: Mapping[str, str | None], unknown: str = "") -> tuple[str, bool]:
    """``text`` with each reference's value (``unknown`` where it has none), and whether one had none."""
    missing = False

    def value(match: re.Match[str]) -> str:
        nonlocal missing
        name, default = match[1] or match[3], match[2]
        found = variables.get(name) if default is None or name in variables else default
        missing = missing or found is None
        return unknown if found is None else found

    return _REFERENCE.sub(value, text), missing


def words_of(text: str, variables: Mapping[str, str | None]) -> list[str]:
    """The line's words with the script's variables in place; a value only known at run time is `UNKNOWN`
    (an option keeps its name: ``--nproc_per_node=$NGPU`` is that option with an unknown value, torchtune's
    ``batch_size=$BS`` that key's)."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError:  # unbalanced quotes: not a command this reads
        return []
    expanded = []
    for word in words:
        whole = _WHOLE.fullmatch(word)
        value = variables.get(whole[1] or whole[2]) if whole else None
        if value is not None:  # ``$ARGS``, ``"${ARGS[@]}"``: its words, as the shell splits them
            expanded += _split(value)
            continue
        found = expand(word, variables) if "$" in word else word
        if found is None:
            name, has_value, _ = word.partition("=")
            found = f"{name}={UNKNOWN}" if has_value and "$" not in name else UNKNOWN
        expanded.append(found)
    return expanded


def _split(value: str) -> list[str]:
    """A variable's words: an array's elements (shell-quoted where it was set), a string's words."""
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()
