"""The `#ADVISOR` job description: what the training is, so the advisor can predict its run time.

`#ADVISOR` lines follow the placement rules of `#SBATCH` lines and carry long options, for example
`#ADVISOR --model=resnet50 --num-classes=10 --global-batch=256 --epochs=90 --dataset-size=1281167`.
The same options are accepted by `advise-submit` before the sbatch options, and win over the script's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from advisor.contract import MAX_BATCH
from advisor.introspect.table import Task
from advisor.jobscript.advisor_words import OPTIONS, description_values
from advisor.jobscript.commands import Inferred
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.styles import STYLES

MAX_STEPS = 10**9
"""More optimizer steps than any job runs: a bound that keeps every later product of them finite."""
MAX_SIDE = 16384
_MODEL = re.compile(
    r"^(?:[a-z][a-z0-9_]*|[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*|hf:[\w.~/-]+|timm:[a-z0-9_.]+)$"
)
MAX_SEQUENCE = 2**20
_FLAG = re.compile(r"^--?[A-Za-z][\w-]*$")
PositiveInt = Annotated[int, Field(ge=1)]
BatchSize = Annotated[int, Field(ge=1, le=MAX_BATCH)]
Tokens = Annotated[int, Field(ge=1, le=MAX_SEQUENCE)]
Side = Annotated[int, Field(ge=1, le=MAX_SIDE)]


class JobDescription(BaseModel):
    """The training a job runs; everything the predictor needs beyond the Slurm request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    model_kwargs: dict[str, int | float | bool | str] = {}
    input_shape: tuple[Side, Side, Side] = (3, 224, 224)
    sequence_length: Tokens | None = None
    """A token model's input: token ids ``[batch, sequence_length]`` (then ``input_shape`` is not read)."""
    target_length: Tokens | None = None
    """A seq2seq model's labels per sample."""
    task: Task | None = None
    """What the loss is computed on; None: what the model is made for (a shipped name's, its config's)."""
    global_batch: BatchSize
    epochs: Annotated[float, Field(gt=0, le=10**6, allow_inf_nan=False)] | None = None
    steps: Annotated[int, Field(ge=1, le=MAX_STEPS)] | None = None
    dataset_size: Annotated[int, Field(ge=1, le=2**40)] | None = None
    batch_range: tuple[BatchSize, BatchSize] | None = None
    allow_amp: bool = True
    """Whether mixed precision may be used (``--amp=yes/no``); what is used is the advice's ``amp``."""
    allow_grad_accum: bool = True
    """Whether micro-batches may be accumulated (``--grad-accum=yes/no``)."""
    workers: Annotated[int, Field(ge=0, le=4096)] | None = None
    follows_advice: bool = True
    """Whether the script reads the advice's ``ADVISOR_*`` variables (`advisor.runtime`); False for one read
    from its training command, whose own flags fix its batch per device and its precision: only the
    partition and the time limit may change then."""
    own_amp: bool = False
    """Whether such a script turns mixed precision on by its own flags (``--amp``, ``--fp16``, ``--bf16``)."""
    own_accumulation: PositiveInt = 1
    """The micro-batches such a script accumulates per step by its own flag (``--grad-accum-steps``)."""
    batch_via: Literal["env", "flag"] = "env"
    batch_flag: str | None = None
    gradient_checkpointing: bool = False
    """Read from the script (``--gradient_checkpointing``): a step recomputes each block's forward."""
    lora_rank: PositiveInt | None = None
    """A LoRA adapter's rank where the script trains one (``--use_peft``, ``--lora_r``): a frozen base."""
    lora_targets: tuple[Annotated[str, Field(max_length=200)], ...] = Field(default=(), max_length=64)
    """The layers LoRA adapts (``--lora_target_modules``: names, or ``all-linear``); none: PEFT's defaults."""
    zero_stage: Annotated[int, Field(ge=0, le=3)] | None = None
    """DeepSpeed ZeRO's stage from the script's DeepSpeed or accelerate file (memory sharded per GPU)."""
    hybrid_shard: bool = False
    """FSDP's hybrid sharding (``HYBRID_SHARD``): the stage's state sharded among one node's GPUs only."""
    optimizer: Literal["sgd", "adam", "adamw"] | None = None
    """The script's optimizer (``--optim``, timm's ``--opt``); None: SGD with momentum, as benchmarked."""

    @field_validator("model")
    @classmethod
    def _model_reference(cls, value: str) -> str:
        if not _MODEL.match(value):
            raise ValueError(
                "expected a torchvision model name (resnet50), hf:NAME_OR_FOLDER, timm:NAME or "
                "package.module:factory"
            )
        return value

    @field_validator("batch_flag")
    @classmethod
    def _flag_shape(cls, value: str | None) -> str | None:
        if value is not None and not _FLAG.match(value):
            raise ValueError("expected an option name such as --batch-size")
        return value

    @field_validator("model")
    @classmethod
    def _no_parent_steps(cls, value: str) -> str:
        if value.startswith("hf:") and ".." in value.split("/"):
            raise ValueError("a model folder is named without '..'")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> JobDescription:
        if (self.epochs is None) == (self.steps is None):
            raise ValueError("give exactly one of --epochs and --steps")
        if self.epochs is not None and self.dataset_size is None:
            raise ValueError("--epochs needs --dataset-size (samples per epoch)")
        if self.batch_range is not None:
            low, high = self.batch_range
            if not low <= self.global_batch <= high:
                raise ValueError(
                    f"--global-batch {self.global_batch} lies outside --batch-range {low}:{high}"
                )
        if self.follows_advice and (self.own_amp or self.own_accumulation != 1):
            raise ValueError("only a script that ignores the advice keeps its own precision and accumulation")
        if self.target_length is not None and self.task is not Task.SEQ2SEQ:
            raise ValueError("--target-length is a seq2seq model's: give --task=seq2seq")
        if (self.batch_via == "flag") != (self.batch_flag is not None):
            raise ValueError("--batch-flag names the flag whose value is the micro-batch; give it alone")
        if self.total_steps > MAX_STEPS:
            raise ValueError(f"--epochs over --dataset-size come to more than {MAX_STEPS} steps")
        return self

    @property
    def total_steps(self) -> int:
        """Optimizer steps of the whole job at the declared global batch."""
        if self.steps is not None:
            return self.steps
        assert self.epochs is not None and self.dataset_size is not None
        return math.ceil(self.epochs * math.ceil(self.dataset_size / self.global_batch))


Infer = Callable[[str | None], Inferred | None]
"""Reads the training command in the named convention (None: recognised by its flags)."""


def parse_description(script: str, where: str, command_line: Sequence[str] = ()) -> JobDescription | None:
    """The job description from the script's `#ADVISOR` lines, overridden by command-line options.

    None when neither says anything: the job is then submitted as it is, without a prediction.
    """
    return describe_job(script, where, command_line)[0]


def describe_job(
    script: str, where: str, command_line: Sequence[str] = (), infer: Infer | None = None
) -> tuple[JobDescription | None, Inferred | None]:
    """`parse_description`, and where neither names a model, over what ``infer`` reads from the training
    command (`#ADVISOR` values win); the second is what was inferred, used where the first is not None. A
    command without its dataset's size (``lacking``) is used only where `#ADVISOR` gives it."""
    values, origin = description_values(script, where, command_line)
    style = values.pop("command_style", None)
    if style is not None and style not in STYLES:
        raise ScriptError(origin["command_style"], f"--command-style: expected one of {', '.join(STYLES)}")
    inferred = infer(style) if infer is not None and "model" not in values else None
    if inferred is not None and (inferred.lacking is None or "dataset_size" in values):
        origin = {**dict.fromkeys(inferred.values, inferred.place), **origin}
        values = {**inferred.values, **values}
    if not values:
        return None, inferred
    return _validated(values, origin, where), inferred


def _validated(values: dict[str, Any], origin: dict[str, str], where: str) -> JobDescription:
    if "batch_flag" in values:
        values["batch_via"] = "flag"
    try:
        return JobDescription.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        if error["loc"]:
            field = str(error["loc"][0])
            option = next((name for name, target in OPTIONS.items() if target == field), "")
            message = f"{option}: {error['msg']}" if option else error["msg"]
        else:  # a rule across fields: placed where the first option it names was set
            message = error["msg"].removeprefix("Value error, ")
            named = [target for name, target in OPTIONS.items() if name in message and target in origin]
            field = named[0] if named else ""
        raise ScriptError(origin.get(field, where), message) from None
