"""What sbatch 22.05 would submit for a script, an environment and a command line.

Precedence is sbatch's: script directives, then SBATCH_* variables, then the command line, each later
duplicate winning. Hetjob components are all read and checked; the fields describe the first one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from advisor.jobscript import values
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import SBATCH_PREFIXES, Directive, check_script, header_lines, read_directives
from advisor.jobscript.options import Option, command_line_segments, options_from_environment, parse_options
from advisor.jobscript.pbs import pbs_options

_T = TypeVar("_T")
_FOREIGN_PREFIXES = ("#PBS", "#BSUB")
_MEMORY_OPTIONS = ("mem", "mem-per-cpu", "mem-per-gpu")
_GPU_PER: dict[str, Literal["job", "node", "task"]] = {
    "gpus": "job",
    "gres": "node",
    "gpus-per-node": "node",
    "gpus-per-task": "task",
}
_GPU_LISTS = ("gpus", "gpus-per-node", "gpus-per-task", "gpus-per-socket")
#: sbatch checks these as each occurrence is set, so a bad value fails even when a later source overrides
#: it; GPU forms and partitions are checked on the final value only.
_CHECKED_WHEN_SET: dict[str, Callable[[str, str, str], object]] = {
    "time": values.time_minutes,
    "time-min": values.time_minutes,
    "mem": values.memory_mb,
    "mem-per-cpu": values.memory_mb,
    "mem-per-gpu": values.memory_mb,
    "ntasks": values.positive_int,
    "ntasks-per-node": values.positive_int,
    "cpus-per-task": values.positive_int,
    "nodes": values.node_range,
    "exclusive": values.choice,
    "no-kill": values.choice,
}


class GpuRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    count: int
    type: str | None
    per: Literal["job", "node", "task"]
    #: The option the user wrote it with, so a rewrite can keep the user's form.
    option: str


class JobRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    partitions: list[str]
    gpus: GpuRequest | None
    nodes_min: int | None
    nodes_max: int | None
    ntasks: int | None
    ntasks_per_node: int | None
    cpus_per_task: int | None
    mem_mb: int | None
    mem_per_cpu_mb: int | None
    mem_per_gpu_mb: int | None
    time_limit: timedelta | None
    time_min: timedelta | None
    job_name: str | None
    account: str | None
    qos: str | None
    array: str | None
    dependency: str | None
    output: str | None
    error: str | None
    export: str | None
    hold: bool
    #: Every effective option by canonical name, including those without a field above.
    options: dict[str, str | None]
    het_components: int
    #: sbatch translates these unless --ignore-pbs; the advisor only reports them.
    foreign_directives: list[str]
    script: str
    script_args: list[str]

    @property
    def world_size(self) -> int:
        """The devices the job trains on across its nodes, as its GPU request counts them (at least one)."""
        gpus, nodes = self.gpus, self.nodes_min or 1
        if gpus is None:
            return 1
        if gpus.per == "task":
            return max(gpus.count * (self.ntasks or 1), 1)
        return max(gpus.count * (nodes if gpus.per == "node" else 1), 1)

    def job_variables(self) -> dict[str, str]:
        """The variables Slurm sets in the job from what it asks for, where the request fixes them:
        ``--nodes=2`` is ``SLURM_NNODES=2`` (a range, ``2-4``, fixes none; no ``--nodes`` and no ``--ntasks``
        is one node), so that ``--num_nodes=$SLURM_NNODES`` reads as the job will run it."""
        fixed = self.nodes_min if self.nodes_max in (None, self.nodes_min) else None
        nodes = 1 if self.nodes_min is None and self.ntasks is None else fixed
        tasks = self.ntasks or (
            None if nodes is None or self.ntasks_per_node is None else self.ntasks_per_node * nodes
        )
        found: dict[str, int | None] = {
            "SLURM_JOB_NUM_NODES": nodes,
            "SLURM_NNODES": nodes,
            "SLURM_NTASKS": tasks,
            "SLURM_NPROCS": tasks,
            "SLURM_NTASKS_PER_NODE": self.ntasks_per_node,
            "SLURM_CPUS_PER_TASK": self.cpus_per_task,
            "SLURM_GPUS_ON_NODE": self._gpus_on_node(nodes),
            "SLURM_GPUS_PER_NODE": self.gpus.count
            if self.gpus and self.gpus.option == "gpus-per-node"
            else None,
        }
        return {name: str(value) for name, value in found.items() if value is not None}

    def _gpus_on_node(self, nodes: int | None) -> int | None:
        """The GPUs of the job's first node (the batch script's): per node as asked, or all on one node."""
        gpus = self.gpus
        if gpus is None or gpus.per == "node":
            return None if gpus is None else gpus.count
        if gpus.per == "task":
            per_node = self.ntasks_per_node or (self.ntasks if nodes == 1 else None)
            return None if per_node is None else gpus.count * per_node
        return gpus.count if nodes == 1 else None


def build_request(script: str, argv: Sequence[str], environ: Mapping[str, str], where: str) -> JobRequest:
    """``argv`` is what follows ``sbatch``: options, then the script path and its own arguments."""
    check_script(script.encode("utf-8", errors="surrogateescape"), where)
    # sbatch's order: the command line's first pass, then per component script, environment, command line.
    segments, rest = command_line_segments(argv)
    from_script = _script_components(read_directives(script, SBATCH_PREFIXES, where), where)
    from_environment = options_from_environment(environ)
    everywhere = [*from_script[0], *from_environment, *(option for segment in segments for option in segment)]
    if not any(option.name == "ignore-pbs" for option in everywhere):
        from_script[0] += pbs_options(script, where)  # sbatch applies #PBS lines after #SBATCH ones
    for source in [*from_script, from_environment, *segments]:
        for option in source:
            if option.name in _CHECKED_WHEN_SET and option.value is not None:
                _CHECKED_WHEN_SET[option.name](option.value, option.name, option.where)
    components = [
        _effective(
            from_script[index] if index < len(from_script) else [],
            from_environment,
            segments[min(index, len(segments) - 1)],
        )
        for index in range(max(len(from_script), len(segments)))
    ]
    # Every component is checked, as sbatch checks them all; the request describes the first.
    requests = [_request(options, script, rest[1:], len(components)) for options in components]
    return requests[0]


def _script_components(directives: list[Directive], where: str) -> list[list[Option]]:
    """One option list per hetjob component, each parsed as one argv the way sbatch does."""
    groups: list[list[Directive]] = [[]]
    for directive in directives:
        if directive.separator:
            groups.append([])
        else:
            groups[-1].append(directive)
    components: list[list[Option]] = []
    for group in groups:
        args = [arg for directive in group for arg in directive.args]
        places = [f"{where}:{directive.line}" for directive in group for _ in directive.args]
        options, rest = parse_options(args, places.__getitem__)
        if rest:
            place = places[len(args) - len(rest)]
            raise ScriptError(place, f"Invalid directive found in batch script: {rest[0]}")
        components.append(options)
    return components


def _effective(
    script: list[Option], environment: list[Option], command_line: list[Option]
) -> dict[str, Option]:
    """Later wins, except for memory: sbatch counts script and command line as one source ("set by
    cli"), refuses two memory options there, and lets one there drop a different one from the environment."""
    merged: dict[str, Option] = {}
    for option in [*script, *environment, *command_line]:
        merged.pop(option.name, None)
        merged[option.name] = option
    by_cli = [option for option in [*script, *command_line] if option.name in _MEMORY_OPTIONS]
    by_env = [option for option in environment if option.name in _MEMORY_OPTIONS]
    if len({option.name for option in by_cli}) > 1:
        raise ScriptError(by_cli[-1].where, "--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.")
    if by_cli:
        for option in by_env:
            if option.name != by_cli[0].name:
                merged.pop(option.name, None)
    elif len({option.name for option in by_env}) > 1:
        raise ScriptError(
            by_env[-1].where,
            "SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are mutually exclusive.",
        )
    return merged


def _request(options: dict[str, Option], script: str, script_args: list[str], components: int) -> JobRequest:
    low, high = _value(options, "nodes", values.node_range) or (None, None)
    return JobRequest(
        partitions=_partitions(options.get("partition")),
        gpus=_gpus(options),
        nodes_min=low,
        nodes_max=high,
        ntasks=_value(options, "ntasks", values.positive_int),
        ntasks_per_node=_value(options, "ntasks-per-node", values.positive_int),
        cpus_per_task=_value(options, "cpus-per-task", values.positive_int),
        mem_mb=_value(options, "mem", values.memory_mb),
        mem_per_cpu_mb=_value(options, "mem-per-cpu", values.memory_mb),
        mem_per_gpu_mb=_value(options, "mem-per-gpu", values.memory_mb),
        time_limit=_value(options, "time", values.time_minutes),
        time_min=_value(options, "time-min", values.time_minutes),
        job_name=_text(options, "job-name"),
        account=_text(options, "account"),
        qos=_text(options, "qos"),
        array=_text(options, "array"),
        dependency=_text(options, "dependency"),
        output=_text(options, "output"),
        error=_text(options, "error"),
        export=_text(options, "export"),
        hold="hold" in options,
        options={name: option.value for name, option in options.items()},
        het_components=components,
        foreign_directives=[
            prefix
            for prefix in _FOREIGN_PREFIXES
            if any(line.startswith(prefix) for line in header_lines(script))
        ],
        script=script,
        script_args=script_args,
    )


def _value(options: Mapping[str, Option], name: str, parse: Callable[[str, str, str], _T]) -> _T | None:
    option = options.get(name)
    return None if option is None else parse(_given(option), name, option.where)


def _text(options: Mapping[str, Option], name: str) -> str | None:
    option = options.get(name)
    return None if option is None else option.value


def _given(option: Option) -> str:
    """Options with a field all take a required argument, so a value is always there."""
    assert option.value is not None
    return option.value


def _partitions(option: Option | None) -> list[str]:
    if option is None:
        return []
    if not _given(option):
        raise ScriptError(option.where, "invalid partition specified: (null)")
    # Slurm skips empty names: "t4,,a100" is t4 and a100.
    return [name for name in _given(option).split(",") if name]


def _gpus(options: Mapping[str, Option]) -> GpuRequest | None:
    """The GPU option given last; typed and untyped GPU requests may not be mixed (sbatch's rule)."""
    items: dict[str, list[values.GpuItem]] = {}
    for name, option in options.items():
        if name == "gres":
            items[name] = values.gres_gpus(_given(option), option.where)
        elif name in _GPU_LISTS:
            items[name] = values.gpus(_given(option), option.where)
        else:
            continue
        typed = {item.type is not None for found in items.values() for item in found}
        if len(typed) > 1:
            raise ScriptError(
                option.where, "Invalid GRES specification (with and without type identification)"
            )
    chosen = [name for name, found in items.items() if found and name in _GPU_PER]
    if not chosen:
        return None
    found = items[chosen[-1]]
    types = {item.type for item in found}
    return GpuRequest(
        count=sum(item.count for item in found),
        type=types.pop() if len(types) == 1 else None,
        per=_GPU_PER[chosen[-1]],
        option=chosen[-1],
    )
