"""One submission understood whole: the Slurm request and the `#ADVISOR` job description."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from advisor.jobscript.advisor_lines import JobDescription, describe_job
from advisor.jobscript.advisor_words import split_command_line
from advisor.jobscript.commands import CommandReading, Grant, Inferred, infer_description
from advisor.jobscript.datasets import Dataset, shipped_datasets
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import STDIN, check_script
from advisor.jobscript.recipes import Read
from advisor.jobscript.request import JobRequest, build_request

MAX_NAMED_FILE_BYTES = 2**20
"""The most of a file a training command names that is read (`read_named_file`) or sent to the daemon."""


class ParsedSubmission(BaseModel):
    model_config = ConfigDict(frozen=True)

    request: JobRequest
    description: JobDescription | None
    inferred_from: str | None = None
    """Where the description was read from the training command (``train.sh:12 (torchvision): ...``)."""
    files_read: tuple[str, ...] = ()
    """The files that command names and that were read for it (its recipe, accelerate's, DeepSpeed's)."""
    files_unread: tuple[str, ...] = ()
    """Those that could not be read where the job was parsed (the daemon reads no user's file)."""
    undescribed: str | None = None
    """Why the training command the script runs describes no job, after its place (``train.sh:12: ...``):
    epochs over data the dataset table does not know, flags it does not read (`Inferred.lacking`)."""
    job_name: str = "sbatch"
    """The name Slurm gives the job: ``--job-name``, else the script's file name (``sbatch`` for stdin)."""


def parse_job(
    data: bytes,
    where: str,
    sbatch_argv: Sequence[str],
    environ: Mapping[str, str],
    description_args: Sequence[str] = (),
    reading: CommandReading | None = None,
) -> ParsedSubmission:
    """Everything sbatch would refuse is refused here first, with sbatch's reason and the place;
    ``reading``'s datasets are the site's table (`load_datasets`; empty or None: the shipped one), its
    ``read`` reads the files the training command names (the user's process only)."""
    given = reading or CommandReading({})
    script = check_script(data, where)
    request = build_request(script, sbatch_argv, environ, where)

    def infer(style: str | None) -> Inferred | None:
        world, nodes = request.world_size, request.nodes_min or 1
        with_table = CommandReading(given.datasets or shipped_datasets(), given.read)
        grant = Grant(world, nodes, request.job_variables())
        return infer_description(script, where, grant, with_table, style)

    description, inferred = describe_job(script, where, description_args, infer)
    name = request.job_name or (Path(where).name if where != STDIN else "sbatch")
    if inferred is None or description is None:
        lacking = None if inferred is None else inferred.lacking
        why = None if inferred is None or lacking is None else f"{inferred.place}: {lacking}"
        return ParsedSubmission(request=request, description=description, undescribed=why, job_name=name)
    return ParsedSubmission(
        request=request,
        description=description,
        inferred_from=f"{inferred.place} ({inferred.style}): {inferred.command}",
        files_read=inferred.files,
        files_unread=inferred.unread,
        job_name=name,
    )


def parse_submission(
    script: Path,
    words: Sequence[str],
    environ: Mapping[str, str],
    datasets: Mapping[str, Dataset] | None = None,
) -> ParsedSubmission:
    """`words` are job-description options first, then sbatch options, as advise-submit takes them; the
    files the training command names are read as the job would find them, from the working directory."""
    ours, sbatch_options = split_command_line(words)
    try:
        data = script.read_bytes()
    except OSError as exc:
        raise ScriptError(str(script), f"cannot read: {exc.strerror}") from None
    argv = [*sbatch_options, str(script)]
    return parse_job(data, str(script), argv, environ, ours, CommandReading(datasets or {}, read_named_file))


def read_named_file(name: str) -> str | None:
    """A file a training command names, as the user running this reads it (a megabyte at most)."""
    try:
        with Path(name).expanduser().open("rb") as file:
            data = file.read(MAX_NAMED_FILE_BYTES + 1)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace") if len(data) <= MAX_NAMED_FILE_BYTES else None


def named_files(
    data: bytes,
    where: str,
    sbatch_argv: Sequence[str],
    environ: Mapping[str, str],
    description_args: Sequence[str],
) -> dict[str, str]:
    """The files the job's training command names, by the name it gives them, each as `read_named_file` reads
    it here (where the job will find them): what the daemon, which reads no user's file, is sent to parse
    (`sent_files`). None of them for a script the daemon will refuse anyway."""
    files: dict[str, str] = {}

    def read(name: str) -> str | None:
        text = read_named_file(name)
        if text is not None:
            files[name] = text
        return text

    try:
        parse_job(data, where, sbatch_argv, environ, description_args, CommandReading({}, read))
    except ScriptError:
        return {}
    return files


def sent_files(files: Mapping[str, str]) -> Read:
    """The daemon's reader: a name the command gives is looked up in the files the request carries, and
    only there (the file system is never asked), so the advice rests on what the user's process read."""

    def read(name: str) -> str | None:
        return files.get(name)

    return read
