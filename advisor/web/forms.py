"""The compare form: what a user types, checked field by field, and the batch script it stands for.

Pure: a form's values in, a `Compare` or each bad field's message out; the script is the `#SBATCH` and
`#ADVISOR` lines `advise-submit` would read, so the page asks the daemon exactly what a submission would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
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
            raise ValueError("a torchvision model name, such as resnet50")
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
