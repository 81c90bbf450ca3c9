"""The sandbox cluster's description (a TOML file in etc/), validated before anything starts."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from advisor.slurm.values import parse_duration

_NAME = r"^[a-z][a-z0-9]*$"


class SandboxConfigError(ValueError):
    """A sandbox description that cannot describe a cluster; the message names the file and field."""


class PartitionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=_NAME, max_length=20)]
    nodes: Annotated[int, Field(ge=1, le=16)]
    cpus_per_node: Annotated[int, Field(ge=1, le=1024)]
    memory_mb: Annotated[int, Field(ge=100)]
    max_time: str = "UNLIMITED"
    gpu_type: Annotated[str, Field(pattern=_NAME)] | None = None
    gpus_per_node: Annotated[int, Field(ge=0, le=16)] = 0
    default: bool = False
    speed: Annotated[float, Field(gt=0, le=1)] = 1.0
    """The share of the CPUs its jobs may use that each node really gets (`advisor.sandbox.speed`): 0.4 runs
    its jobs at 40%, so partitions differ in measured speed, not only in price."""

    @field_validator("max_time")
    @classmethod
    def _slurm_time(cls, value: str) -> str:
        parse_duration(value)
        return value

    @model_validator(mode="after")
    def _gpus_have_a_type(self) -> PartitionSpec:
        if (self.gpu_type is None) != (self.gpus_per_node == 0):
            raise ValueError("gpu_type and gpus_per_node go together (both set, or neither)")
        return self

    def node_names(self) -> list[str]:
        return [f"{self.name}-{index}" for index in range(1, self.nodes + 1)]


class SchedulerSpec(BaseModel):
    """Scheduler timing; the defaults suit interactive use, a replay in compressed time tightens them.

    Unset options are left out of slurm.conf, so Slurm's own defaults apply.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    sched_interval_s: Annotated[int, Field(ge=1)] | Literal[-1] | None = None
    """-1: the main scheduling loop off, only backfill starts jobs (a replay in compressed time)."""
    bf_interval_s: Annotated[int, Field(ge=1, le=10800)] = 2
    bf_resolution_s: Annotated[int, Field(ge=1, le=3600)] | None = None
    bf_window_min: Annotated[int, Field(ge=1, le=43200)] | None = None
    bf_continue: bool = False
    min_job_age_s: Annotated[int, Field(ge=0)] = 300

    def parameters(self) -> str:
        """The value of ``SchedulerParameters``."""
        options = {
            "sched_interval": self.sched_interval_s,
            "bf_interval": self.bf_interval_s,
            "bf_resolution": self.bf_resolution_s,
            "bf_window": self.bf_window_min,
        }
        words = [f"{name}={value}" for name, value in options.items() if value is not None]
        return ",".join([*words, *(["bf_continue"] if self.bf_continue else [])])


class SandboxSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=_NAME, max_length=20)] = "sandbox"
    base_port: Annotated[int, Field(ge=1024, le=65000)] = 16817
    partition: Annotated[list[PartitionSpec], Field(min_length=1)]
    scheduler: SchedulerSpec = SchedulerSpec()
    cli_filter: bool = False
    """Plain sbatch advised: slurm.conf loads ``cli_filter/lua`` and the advisor's Lua sits beside it."""

    @model_validator(mode="after")
    def _consistent(self) -> SandboxSpec:
        names = [p.name for p in self.partition]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"partition names must be unique, repeated: {', '.join(duplicates)}")
        if sum(p.default for p in self.partition) > 1:
            raise ValueError("at most one partition may be the default")
        if self.base_port + self.port_count() > 65535:
            raise ValueError("base_port leaves too few ports for every daemon")
        return self

    def node_names(self) -> list[str]:
        return [node for p in self.partition for node in p.node_names()]

    def default_partition(self) -> str:
        return next((p.name for p in self.partition if p.default), self.partition[0].name)

    def port_count(self) -> int:
        """slurmctld, slurmdbd, MariaDB, then one port per slurmd."""
        return 3 + sum(p.nodes for p in self.partition)

    @property
    def slurmctld_port(self) -> int:
        return self.base_port

    @property
    def slurmdbd_port(self) -> int:
        return self.base_port + 1

    @property
    def mariadb_port(self) -> int:
        return self.base_port + 2

    def slurmd_ports(self) -> dict[str, int]:
        return {node: self.base_port + 3 + i for i, node in enumerate(self.node_names())}


def load_spec(path: Path) -> SandboxSpec:
    """Read and validate a sandbox description, naming the file and field on any error."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SandboxConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SandboxConfigError(f"{path}: not valid TOML: {exc}") from exc
    try:
        return SandboxSpec.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{_location(err['loc'])}: {err['msg']}" for err in exc.errors())
        raise SandboxConfigError(f"{path}: {problems}") from exc


def _location(loc: tuple[int | str, ...]) -> str:
    text = ".".join(str(part) for part in loc) or "(top level)"
    return re.sub(r"\.(\d+)", r"[\1]", text)
