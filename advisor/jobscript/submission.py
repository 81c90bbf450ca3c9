"""One submission understood whole: the Slurm request and the `#ADVISOR` job description."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from advisor.jobscript.advisor_lines import JobDescription, parse_description
from advisor.jobscript.advisor_words import description_values, split_command_line
from advisor.jobscript.commands import STYLES, Inferred, infer_description, known_datasets
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import check_script
from advisor.jobscript.request import JobRequest, build_request


class ParsedSubmission(BaseModel):
    model_config = ConfigDict(frozen=True)

    request: JobRequest
    description: JobDescription | None
    inferred_from: str | None = None
    """Where the description was read from the training command (``train.sh:12 (torchvision): ...``)."""


def parse_job(
    data: bytes,
    where: str,
    sbatch_argv: Sequence[str],
    environ: Mapping[str, str],
    description_args: Sequence[str] = (),
) -> ParsedSubmission:
    """Everything sbatch would refuse is refused here first, with sbatch's reason and the place."""
    script = check_script(data, where)
    request = build_request(script, sbatch_argv, environ, where)
    inferred = _inferred(script, where, request)
    description = parse_description(script, where, description_args, inferred)
    used = inferred is not None and description is not None and description.model == inferred.values["model"]
    return ParsedSubmission(
        request=request,
        description=description,
        inferred_from=f"{inferred.place} ({inferred.style}): {inferred.command}"
        if used and inferred
        else None,
    )


def _inferred(script: str, where: str, request: JobRequest) -> Inferred | None:
    """The training command's description, where the script names no model of its own."""
    values, _ = description_values(script, where)
    if "model" in values:
        return None
    nodes = request.nodes_min or 1
    gpus = request.gpus
    world = 1 if gpus is None else gpus.count * (nodes if gpus.per == "node" else 1)
    if gpus is not None and gpus.per == "task":
        world = gpus.count * (request.ntasks or 1)
    style = values.get("command_style")  # one this cannot read is parse_description's to report
    style = style if style in STYLES else None
    return infer_description(script, where, max(world, 1), nodes, known_datasets(), style)


def parse_submission(script: Path, words: Sequence[str], environ: Mapping[str, str]) -> ParsedSubmission:
    """`words` are job-description options first, then sbatch options, as advise-submit takes them."""
    ours, sbatch_options = split_command_line(words)
    try:
        data = script.read_bytes()
    except OSError as exc:
        raise ScriptError(str(script), f"cannot read: {exc.strerror}") from None
    return parse_job(data, str(script), [*sbatch_options, str(script)], environ, ours)
