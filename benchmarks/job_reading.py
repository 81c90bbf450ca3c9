"""What the advisor reads from job scripts written as their projects' READMEs and examples write them
(``benchmarks/jobs/``: Megatron-LM, nanoGPT, torchtitan, timm, DeiT, Hugging Face and TRL under accelerate,
deepspeed and torchrun, Lightning): each script's convention, model, global batch and length, or why it
describes no job. Each is read in the folder, as `advise-submit` reads the files a command names.

``python benchmarks/job_reading.py [--jobs DIR]``; with ``PYTHONPATH=WORKTREE`` the same scripts read by
another tree (the commit before a change), side by side with this one's table.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor.jobscript.errors import ScriptError
from advisor.jobscript.submission import ParsedSubmission, parse_submission

JOBS = Path(__file__).resolve().parent / "jobs"
_PLACE = re.compile(r"^\S+:\d+: ")
"""A reason's place (``job.sh:6: ``): the table's first column names the script."""


def read(script: Path) -> ParsedSubmission | str:
    """The script as `advise-submit` parses it in its folder; what failed, where it did."""
    here = Path.cwd()
    os.chdir(script.parent)
    try:
        return parse_submission(Path(script.name), [], {})
    except ScriptError as error:
        return f"refused: {error}"
    except Exception as error:
        return f"failed: {type(error).__name__}: {error}"
    finally:
        os.chdir(here)


def row(script: Path, parsed: ParsedSubmission | str) -> list[str]:
    if isinstance(parsed, str):
        return [script.name, "-", parsed, "", ""]
    described = parsed.description
    if described is None:
        return [script.name, "-", _PLACE.sub("", parsed.undescribed or "nothing read"), "", ""]
    style = (parsed.inferred_from or "").split(" (", 1)[-1].split(")", 1)[0]
    length = f"{described.steps:,} steps" if described.steps else f"{described.epochs:g} epochs"
    return [script.name, style, described.model, str(described.global_batch), length]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=Path, default=JOBS)
    args = parser.parse_args(argv)
    table = Table(title="job scripts as the advisor reads them", title_justify="left")
    for column in ("script", "read as", "model, or why not", "global batch", "length"):
        table.add_column(column, overflow="fold")
    scripts = sorted(args.jobs.glob("*.sh"))
    rows = [row(script, read(script)) for script in scripts]
    for cells in rows:
        table.add_row(*cells)
    Console(width=160).print(table)
    described = sum(cells[1] != "-" for cells in rows)
    print(f"{described} of {len(rows)} scripts describe a job")
    return 0


if __name__ == "__main__":
    sys.exit(main())
