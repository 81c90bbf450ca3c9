"""What the advisor reads from job scripts written as their projects' READMEs and examples write them
(``benchmarks/jobs/``: Megatron-LM, nanoGPT, torchtitan, timm, DeiT, Hugging Face and TRL under accelerate,
deepspeed and torchrun, Lightning, LLaMA-Factory, axolotl, torchtune, fairseq, OpenMMLab, torchvision's
references, users' own scripts): each script's convention, model, global batch and length, or why it
describes no job, against the reading its ``# expected:`` line works out by hand. Each is read in
the folder, as `advise-submit` reads the files a command names.

``python benchmarks/job_reading.py [--jobs DIR]``; with ``PYTHONPATH=WORKTREE`` the same scripts read by
another tree (the commit before a change), side by side with this one's table.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from advisor.jobscript.errors import ScriptError
from advisor.jobscript.submission import ParsedSubmission, parse_submission

JOBS = Path(__file__).resolve().parent / "jobs"
_EXPECTED = re.compile(r"^# expected: (.+)$", re.MULTILINE)
_VERDICTS = ("right", "refused", "missed, said why", "wrong", "silent", "failed")
"""right: read as expected; refused: not read, as expected, with why; missed: a job expected, not read, but
said why; wrong: read otherwise than expected (or read where none is); silent: not read, nothing said."""
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


def expected(script: Path) -> str | None:
    """The script's ``# expected: MODEL, GLOBAL BATCH, LENGTH`` (or ``none``), worked out by hand from the
    project's own semantics; None where it says none."""
    found = _EXPECTED.search(script.read_text(encoding="utf-8"))
    return found[1].strip() if found else None


def row(script: Path, parsed: ParsedSubmission | str) -> list[str]:
    if isinstance(parsed, str):
        return [script.name, "-", parsed, "", "", "failed"]
    described = parsed.description
    truth = expected(script)
    if described is None:
        why = _PLACE.sub("", parsed.undescribed or "")
        verdict = "silent" if not why else ("refused" if truth == "none" else "missed, said why")
        return [script.name, "-", why or "nothing said", "", "", verdict]
    style = (parsed.inferred_from or "").split(" (", 1)[-1].split(")", 1)[0]
    length = f"{described.steps} steps" if described.steps else f"{described.epochs:g} epochs"
    read_as = f"{described.model}, {described.global_batch}, {length}"
    verdict = "right" if read_as == truth else "wrong"
    return [script.name, style, described.model, f"{described.global_batch:,}", _shown(length), verdict]


def _shown(length: str) -> str:
    count, unit = length.split(" ")
    number = float(count)
    return f"{number:,g} {unit.rstrip('s') if number == 1 else unit}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=Path, default=JOBS)
    args = parser.parse_args(argv)
    table = Table(title="job scripts as the advisor reads them", title_justify="left")
    for column in ("script", "read as", "model, or why not", "global batch", "length", "against expected"):
        table.add_column(column, overflow="fold")
    scripts = sorted(args.jobs.glob("*.sh"))
    rows = [row(script, read(script)) for script in scripts]
    for cells in rows:
        table.add_row(*cells)
    Console(width=160).print(table)
    described = sum(cells[1] != "-" for cells in rows)
    verdicts = Counter(cells[-1] for cells in rows)
    counted = ", ".join(f"{verdicts[name]} {name}" for name in _VERDICTS if verdicts[name])
    print(f"{described} of {len(rows)} scripts describe a job; against their expected reading: {counted}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
