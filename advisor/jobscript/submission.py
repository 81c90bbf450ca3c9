"""One submission understood whole: the Slurm request and the `#ADVISOR` job description."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from advisor.jobscript.advisor_lines import JobDescription, parse_description
from advisor.jobscript.advisor_words import split_command_line
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import check_script
from advisor.jobscript.request import JobRequest, build_request


class ParsedSubmission(BaseModel):
    model_config = ConfigDict(frozen=True)

    request: JobRequest
    description: JobDescription | None


def parse_job(
    data: bytes,
    where: str,
    sbatch_argv: Sequence[str],
    environ: Mapping[str, str],
    description_args: Sequence[str] = (),
) -> ParsedSubmission:
    """Everything sbatch would refuse is refused here first, with sbatch's reason and the place."""
    script = check_script(data, where)
    return ParsedSubmission(
        request=build_request(script, sbatch_argv, environ, where),
        description=parse_description(script, where, description_args),
    )


def parse_submission(script: Path, words: Sequence[str], environ: Mapping[str, str]) -> ParsedSubmission:
    """`words` are job-description options first, then sbatch options, as advise-submit takes them."""
    ours, sbatch_options = split_command_line(words)
    try:
        data = script.read_bytes()
    except OSError as exc:
        raise ScriptError(str(script), f"cannot read: {exc.strerror}") from None
    return parse_job(data, str(script), [*sbatch_options, str(script)], environ, ours)
