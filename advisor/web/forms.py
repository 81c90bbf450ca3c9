"""The compare form: what a user types, checked field by field, and the batch script it stands for; or a
batch script of the user's own, pasted.

Pure: a form's values in, a `Compare` or each bad field's message out; the script is the `#SBATCH` and
`#ADVISOR` lines `advise-submit` would read, so the page asks the daemon exactly what a submission would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from advisor.jobscript.lexer import MAX_SCRIPT_BYTES

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(:[A-Za-z_][A-Za-z0-9_]*)?$")
"""A torchvision name, or ``package.module:factory`` (the user's own code, introspected in a child of the
page's process, which runs as the user: `advisor.factory_table`)."""
_FILE_NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,100}$")
WHERE = "train.sbatch"
"""What the script is called in the daemon's messages and the command to copy, where its file's name is not
known (the form's, and a pasted script's)."""
_PARTITION = re.compile(r"^[A-Za-z0-9_.-]*$")


class Compare(BaseModel):
    """One model at one batch and length, asked about every partition the user may use."""

    model_config = ConfigDict(frozen=True, extra="ignore", str_strip_whitespace=True)

    model: str = Field(min_length=1, max_length=100)
    input_shape: str = "3,224,224"
    global_batch: int = Field(ge=1, le=1_000_000)
    steps: int = Field(ge=1, le=100_000_000)
    partition: str = Field(default="", max_length=100)
    """Where the job would go as written; empty: the cluster's default partition."""
    gpus: int = Field(default=1, ge=0, le=64)
    time: str = Field(default="1-00:00:00", max_length=20)

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("a torchvision model name, such as resnet50, or package.module:factory")
        return value

    @field_validator("input_shape")
    @classmethod
    def _shape(cls, value: str) -> str:
        parts = value.replace(" ", "").split(",")
        if len(parts) != 3 or not all(part.isdigit() and 0 < int(part) <= 16384 for part in parts):
            raise ValueError("three positive sizes C,H,W, such as 3,224,224")
        return ",".join(parts)

    @field_validator("partition")
    @classmethod
    def _partition(cls, value: str) -> str:
        if not _PARTITION.match(value):
            raise ValueError("a partition name")
        return value

    @field_validator("time")
    @classmethod
    def _time(cls, value: str) -> str:
        if not re.match(r"^(\d+-)?\d{1,2}:\d{2}:\d{2}$", value):
            raise ValueError("a time limit [D-]HH:MM:SS")
        return value


_MESSAGES = {
    "int_parsing": "a whole number",
    "greater_than_equal": "at least {ge}",
    "less_than_equal": "at most {le}",
    "string_too_short": "required",
    "missing": "required",
}


def read_form(values: Mapping[str, str]) -> tuple[Compare | None, dict[str, str]]:
    """The form, or the message for each bad field (shown next to it), never an exception."""
    given = {name: value for name, value in values.items() if value != "" or name == "partition"}
    try:
        return Compare.model_validate(given), {}
    except ValidationError as error:
        found: dict[str, str] = {}
        for problem in error.errors():
            field = str(problem["loc"][0]) if problem["loc"] else "form"
            template = _MESSAGES.get(problem["type"])
            context = problem.get("ctx") or {}
            if template is not None:
                message = template.format(**context)
            else:
                message = str(problem["msg"]).removeprefix("Value error, ")
            found.setdefault(field, message)
        return None, found


def directives(form: Compare) -> list[str]:
    """The lines a batch script needs for this comparison, as a user would paste them."""
    lines = [f"#SBATCH --partition={form.partition}"] if form.partition else []
    if form.gpus:
        lines.append(f"#SBATCH --gres=gpu:{form.gpus}")
    lines.append(f"#SBATCH --time={form.time}")
    lines.append(
        f"#ADVISOR --model={form.model} --input-shape={form.input_shape} "
        f"--global-batch={form.global_batch} --steps={form.steps}"
    )
    return lines


def script(form: Compare) -> bytes:
    return ("#!/bin/sh\n" + "\n".join(directives(form)) + "\npython train.py\n").encode()


@dataclass(frozen=True)
class Pasted:
    """A batch script pasted (or read from a file by the page) into the form, asked about as it stands."""

    script: bytes
    where: str
    """The file's name, for messages and the command to copy."""


def read_pasted(text: str, name: str) -> tuple[Pasted | None, str | None]:
    """The script, or the message shown next to it. A browser sends a text area's lines ending in CRLF
    whatever the file had; sbatch refuses DOS line breaks, so they are read as the file's own LF."""
    script = text.replace("\r\n", "\n").encode()
    if not script.strip():
        return None, "required: paste a batch script or choose its file"
    if len(script) > MAX_SCRIPT_BYTES:
        return None, f"at most {MAX_SCRIPT_BYTES // 2**20} MiB, as sbatch takes"
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    return Pasted(script, base if _FILE_NAME.match(base) else WHERE), None
