"""A job description read from the training command line, for scripts without `#ADVISOR --model`.

The conventions understood, as their own programs define their flags:
- ``imagenet``: PyTorch's ImageNet example (``-a/--arch``, ``-b/--batch-size`` for all GPUs of a node,
  ``--epochs``, the data folder as its argument);
- ``torchvision``: torchvision's reference scripts (``--model``, ``-b/--batch-size`` per GPU, ``--epochs``,
  ``--data-path``);
- ``timm``: timm's train.py (``--model`` built by timm, ``-b/--batch-size`` per process,
  ``--grad-accum-steps``, ``--epochs``, ``--img-size``, ``--data-dir`` or the data folder as its argument),
  and ``deit``: DeiT's, ConvNeXt's and MAE's main.py over timm's models (`advisor.jobscript.image_jobs`);
- ``hf``: Hugging Face ``TrainingArguments``, TRL and their YAML recipes, and ``lightning``: the
  Lightning CLI (`advisor.jobscript.trainers`), with the files they name (`advisor.jobscript.recipes`);
- ``megatron``: Megatron-LM's GPT pretraining, the model's shape in its flags (`advisor.jobscript.megatron`),
  ``nanogpt``: nanoGPT's train.py, its Python config read as text (`advisor.jobscript.nanogpt`), and
  ``torchtitan``: its trainer and TOML config (`advisor.jobscript.torchtitan`);
- ``axolotl`` and ``torchtune``: LLM fine-tuning from a YAML config (`advisor.jobscript.finetuners`), and
  ``llamafactory``: LLaMA-Factory's (`advisor.jobscript.llamafactory`).
``-`` and ``_`` spellings alike (`advisor.jobscript.arguments`). An image convention is not assumed for a
command with a sizing flag its program does not define (`advisor.jobscript.image_flags`).
Such a script follows its own flags, not the advice's ``ADVISOR_*`` variables (``follows_advice`` is
False): the advice is its partition and time limit, on as many GPUs as it asks for, predicted in its own
precision (``--amp``, ``--fp16``, ``--bf16``) and accumulation.
Under the launchers `advisor.jobscript.launchers` knows (their process counts win over the Slurm
request's where they give them). Lines are the shell's (`advisor.jobscript.shell`: a backslash, an open
quote or an array continues one; a here-document written to a file is that file's text for the commands
after it; ``&&``, ``;`` and ``|`` part its commands,
and ``cd`` moves where the files a command names are read), and the variables the script sets are
followed, strings and arrays of arguments too (``$GPT_ARGS``, ``"${ARGS[@]}"``); a value computed at run
time is not guessed, and then nothing is inferred. Pure: the caller hands in what the Slurm request
grants (`Grant`), the dataset table (`advisor.jobscript.datasets`) and, in the user's own process, a reader
for the files the command names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from advisor.jobscript.arguments import program_options
from advisor.jobscript.datasets import Dataset
from advisor.jobscript.finetuners import (
    FINETUNERS,
    FinetuneCommand,
    config_unread,
    read_finetuner,
    with_overrides,
)
from advisor.jobscript.image_jobs import (
    CONVENTIONS,
    data_words,
    read_images,
    refuse_foreign,
)
from advisor.jobscript.launchers import (
    SUBMITTED,
    UNKNOWN,
    AtRunTime,
    Launch,
    expand_text,
    program_of,
    words_of,
)
from advisor.jobscript.llamafactory import LLAMAFACTORY, read_llamafactory
from advisor.jobscript.megatron import read_megatron
from advisor.jobscript.nanogpt import read_nanogpt
from advisor.jobscript.recipes import Read, ScriptFiles, accelerate_default, recipe_flags
from advisor.jobscript.shell import (
    Document,
    assigned,
    commands_of,
    located,
    logical_lines,
    moved,
    within,
    written_to,
)
from advisor.jobscript.styles import style_of
from advisor.jobscript.torchtitan import read_torchtitan
from advisor.jobscript.trainers import Undescribed, named_data, read_hf, read_lightning


@dataclass(frozen=True)
class Inferred:
    """The fields read from one command line, and where: what `#ADVISOR` lines may still override."""

    values: dict[str, Any]
    place: str
    style: str
    command: str
    files: tuple[str, ...] = ()
    """The files the command names that were read for it (a recipe, accelerate's, DeepSpeed's)."""
    unread: tuple[str, ...] = ()
    """Those that could not be read here (the daemon reads none)."""
    lacking: str | None = None
    """Why the values describe no job: epochs over data the dataset table does not know (`#ADVISOR
    --dataset-size` completes them), or a fine-tuning config that says too little (`Undescribed`)."""


@dataclass(frozen=True)
class CommandReading:
    """What a training command is read with: the dataset table its data names are looked up in, and in the
    user's own process a reader for the files it names (None: the daemon reads none)."""

    datasets: Mapping[str, Dataset]
    read: Read | None = None


@dataclass(frozen=True)
class Grant:
    """What the job's Slurm request gives it: the devices it trains on across its nodes, and the variables
    Slurm sets from the request (`JobRequest.job_variables`: ``$SLURM_NNODES`` under ``--nodes=2``)."""

    world_size: int
    nodes: int
    variables: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Processes:
    """The processes the command starts in all, and the nodes they run on."""

    world: int
    nodes: int


def infer_description(
    script: str,
    where: str,
    grant: Grant,
    reading: CommandReading,
    style: str | None = None,
) -> Inferred | None:
    """The first training command the script runs, read in ``style`` (default: recognised by its flags);
    None where no command says enough (a model the advisor can build, a batch size). One whose length is
    epochs over data the table lacks is returned, ``lacking`` why, where no later command says it all.
    Commands are the shell's (``cd /work && python train.py`` is two), and a file a command names is read
    where the script's ``cd`` has taken it."""
    variables: dict[str, str | None] = {**_KNOWN_AT_SUBMISSION, **grant.variables}
    found = _Found(_Context(grant, reading, style), variables=variables)
    for line in logical_lines(script):
        assignment = assigned(line.text, variables)
        if assignment is not None:
            name, value = assignment
            variables[name] = value
            continue
        for words in commands_of(words_of(line.text, variables)):
            target = None if line.document is None else written_to(words)
            if line.document is not None and target is not None:
                found.wrote(*target, _text_of(line.document, variables))
                continue
            inferred = found.command(words, f"{where}:{line.number}")
            if inferred is not None:
                return inferred
    return found.lacking or found.unread


def _text_of(document: Document, variables: Mapping[str, str | None]) -> str:
    return document.text if document.literal else expand_text(document.text, variables)


_KNOWN_AT_SUBMISSION = {"HOME": "~", "SLURM_SUBMIT_DIR": SUBMITTED}
"""Variables the job has that the submitting user knows: home (``~``, read as the user's own) and the
folder it is submitted from (where `advise-submit` runs)."""


@dataclass(frozen=True)
class _Context:
    grant: Grant
    reading: CommandReading
    style: str | None


@dataclass
class _Found:
    """What the script's commands said so far: why the best one describes no job, where the script is."""

    context: _Context
    lacking: Inferred | None = None
    unread: Inferred | None = None  # the last Python program not read: most often the training one
    folder: str = ""
    variables: Mapping[str, str | None] = field(default_factory=dict)
    """The script's variables as they stand at the command (`infer_description` sets them)."""
    written: dict[str, str] = field(default_factory=dict)
    """The files the script writes from its here-documents (a recipe, accelerate's), by `located`."""

    def wrote(self, name: str, appends: bool, text: str) -> None:
        """A here-document written to ``name``; appended only to one the script wrote (the rest of
        another is on disk)."""
        where = located(self.folder, name)
        if not appends:
            self.written[where] = text
        elif where in self.written:
            self.written[where] += text

    def command(self, words: list[str], place: str) -> Inferred | None:
        """The description one command gives in full; None (keeping why) where it gives none."""
        if words[0] == "cd":
            self.folder = moved(self.folder, words[1:])
            return None
        launch = program_of(words)
        if launch is None:
            return None
        context, (flags, positional) = self.context, program_options(launch.arguments)
        read = context.reading.read
        script = ScriptFiles(
            lambda name: self.written.get(located(self.folder, name)), accelerate_default(self.variables)
        )
        reader = None if read is None else _reader(read, self.folder)
        recipe = recipe_flags(flags, positional, launch.launcher, reader, script)
        merged = {**recipe.values, **flags}
        chosen = context.style or style_of(launch.program, merged, positional)
        command = " ".join(word.replace(UNKNOWN, "?") for word in words)
        files = (tuple(recipe.read), tuple(recipe.unread))
        if chosen is None:
            self.unread = Inferred(
                {}, place, "unknown", command, lacking=_NOT_READ.format(program=launch.program)
            )
            return None
        try:
            values = _values(chosen, launch, merged, positional, recipe.unread, context)
        except AtRunTime:
            why = _AT_RUN_TIME.format(command=command)
            self.unread = Inferred({}, place, chosen, command, *files, lacking=why)
            return None
        except Undescribed as left:  # says why, and what `#ADVISOR` may complete
            self.lacking = self.lacking or Inferred(
                left.values, place, chosen, command, *files, lacking=left.reason.replace(UNKNOWN, "?")
            )
            return None
        if values is None:
            said = _SAYS_TOO_LITTLE.format(program=launch.program)
            self.unread = self.unread or Inferred({}, place, chosen, command, *files, lacking=said)
            return None
        inferred = Inferred(values, place, chosen, command, *files)
        if "epochs" not in values or "dataset_size" in values:
            return inferred
        why = _unknown_data(launch.program, chosen, values, _data_named(chosen, merged, positional))
        self.lacking = self.lacking or replace(inferred, lacking=why)
        return None


def _reader(read: Read, folder: str) -> Read:
    """``read`` from where the script's ``cd`` has taken it."""
    return lambda name: None if (path := within(folder, name)) is None else read(path)


def _values(
    chosen: str,
    launch: Launch,
    flags: Mapping[str, str],
    positional: list[str],
    unread: list[str],
    context: _Context,
) -> dict[str, Any] | None:
    """The command's values in its convention; `AtRunTime` and `Undescribed` say why none."""
    given = context.grant
    processes = _Processes(_world(launch, given.world_size), given.nodes)
    datasets = context.reading.datasets
    if chosen in (*FINETUNERS, LLAMAFACTORY, "nanogpt"):
        tuned = FinetuneCommand(launch.program, flags, positional, unread, processes.world)
        return _read_config(chosen, tuned, datasets)
    if chosen == "torchtitan" and "model.name" not in flags:  # its TOML names it
        config = flags.get("job.config-file", "its config")
        raise Undescribed(config_unread(launch.program, config, "[model] name", unread))
    if context.style is None and chosen in CONVENTIONS:  # a style the user names is read as named
        refuse_foreign(launch.program, CONVENTIONS[chosen], flags)
    return _read(chosen, launch, flags, positional, processes, datasets)


_NOT_READ = (
    "{program} takes flags the advisor does not read (it reads PyTorch's, torchvision's, timm's and DeiT's "
    "image trainers, Hugging Face's and TRL's, Lightning's, Megatron-LM's, nanoGPT's, torchtitan's, "
    "axolotl's, torchtune's and LLaMA-Factory's): say what it trains with #ADVISOR lines (--model, "
    "--global-batch, and --steps or --epochs)"
)
_SAYS_TOO_LITTLE = (
    "{program} does not say what it trains in a form the advisor reads (a model it builds, a batch size, "
    "values known before it runs): say it with #ADVISOR lines (--model, --global-batch, and --steps or "
    "--epochs)"
)
_AT_RUN_TIME = (
    "a value the job sizes itself by is set only when it runs (the ? in: {command}), which the advisor "
    "does not guess: give it with #ADVISOR lines (--global-batch, --steps)"
)


_STEPS_FLAGS = {"hf": "--max_steps", "lightning": "--trainer.max_steps"}


def _unknown_data(program: str, style: str, values: Mapping[str, Any], data: str | None) -> str:
    """Why a command's epochs give no length, and what gives it: worded for `advisor parse` and the advice."""
    epochs = str(values["epochs"])
    plural = "" if epochs == "1" else "s"
    trains = f"{program.rsplit('/', 1)[-1]} trains {values['model']} for {epochs} epoch{plural}"
    over = f"of {data}, a dataset the advisor does not know" if data else "of data the command does not name"
    remedy = 'add "#ADVISOR --dataset-size N" (its training samples)'
    steps = _STEPS_FLAGS.get(style)
    return f"{trains} {over}: {remedy}" + (f" or pass {steps}" if steps else "")


def _data_named(style: str, flags: Mapping[str, str], positional: Sequence[str]) -> str | None:
    """The data a command trains on as its user names it: a trainer's dataset, else an image program's
    data folder (its flag, timm's ``--dataset``, or its argument)."""
    if style in ("hf", "lightning"):
        return named_data(flags)
    folder = next(iter(data_words(CONVENTIONS[style], flags, positional)), None)
    return None if folder is None else f'"{folder}"'


def _world(launch: Launch, world_size: int) -> int:
    """Processes as the launcher starts them (``--nproc_per_node x --nnodes``, accelerate's
    ``--num_processes``), else as Slurm is asked for them."""
    given = launch.launcher
    for total in (given.get("num-processes"), given.get("nproc")):
        if total and total.isdigit():
            return int(total)
    per_node, nodes = given.get("nproc-per-node", ""), given.get("nnodes", "1")
    if per_node.isdigit() and nodes.isdigit():
        return int(per_node) * int(nodes)
    return world_size


def _read_config(
    style: str, command: FinetuneCommand, datasets: Mapping[str, Dataset]
) -> dict[str, Any] | None:
    """The programs whose job is in their own config: the fine-tuners' YAML, nanoGPT's Python."""
    if style == LLAMAFACTORY:
        return read_llamafactory(with_overrides(command), datasets)
    if style == "nanogpt":
        return read_nanogpt(command.flags, list(command.positional), list(command.unread), command.world)
    return read_finetuner(style, command, datasets)


def _read(
    style: str,
    launch: Launch,
    flags: Mapping[str, str],
    positional: Sequence[str],
    processes: _Processes,
    datasets: Mapping[str, Dataset],
) -> dict[str, Any] | None:
    world = processes.world
    if any(UNKNOWN in value for value in flags.values() if value):
        known = {key: value for key, value in flags.items() if UNKNOWN not in value}
        if style in _NAMED_FLAGS and _unknown_matters(flags, known):
            raise AtRunTime(style)
        flags = known if style in _NAMED_FLAGS else flags
    if style == "hf":
        return read_hf(launch.program, flags, world, datasets)
    if style == "lightning":
        return read_lightning(flags, world, datasets)
    if style == "megatron":
        return read_megatron(launch.program, flags, world)
    if style == "torchtitan":
        return read_torchtitan(launch.program, flags, world)
    convention = CONVENTIONS[style]
    scale = processes.nodes if convention.per_node else world
    return read_images(convention, flags, positional, scale, datasets)


_NAMED_FLAGS = ("hf", "lightning", "megatron", "torchtitan")
"""Styles whose sizes are flags of their own: a run-time value of another flag changes nothing."""


def _unknown_matters(flags: Mapping[str, str], known: Mapping[str, str]) -> bool:
    """A flag computed at run time that sizes the job (its batch, length, model, steps): not guessed."""
    sizing: tuple[str, ...] = ("batch", "steps", "epochs", "model", "length", "block-size", "accumulat")
    sizing += ("precision", "f16", "iters", "samples", "layers", "hidden", "heads", "parallel", "seq-len")
    sizing += ("nodes", "devices", "processes", "nproc", "gpus", "world")
    return any(word in key for key in flags.keys() - known.keys() for word in sizing)
