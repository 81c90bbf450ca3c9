"""The docs match the program: every `advisor ...` and `advise-submit ...` command line that README.md, the
guides and systemd/README.md show is parsed by the real parsers (an unknown command or option fails), and
the cheap ones are run and their output's shape checked.

A synopsis is made concrete first: an optional `[--flag VALUE]` is taken in, a descriptive `[sbatch
options]` left out, `a|b` tried both ways, and a placeholder (`SCRIPT`, `JOBID`) given a sample value. A
line in a code block must parse whole; one inside a sentence may stop short (`advisor bench`, the
command alone; `advisor daemon --max-tcp-connections`, an option named without its value), but every word
it has must exist.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from advisor import cli, submit
from advisor.jobscript.advisor_words import split_command_line
from advisor.jobscript.errors import ScriptError
from advisor.jobscript.submission import parse_job
from advisor.settings import load_settings

REPO = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "docs/user-guide.md", "docs/admin-guide.md", "systemd/README.md")
PROGRAMS = ("advisor", "advise-submit")
SAMPLES = {
    "SCRIPT": "job.sh",
    "JOBID": "7",
    "FILE": "file.toml",
    "FILE.png": "plot.png",
    "PATH": "/tmp/x",
    "DIR": "/tmp/site",
    "ENV": "/opt/advisor/venv",
    "MODEL": "resnet18",
    "REF": "resnet18",
    "MACHINE": "a100",
    "VERSION": "1",
    "P": "a100",
    "B": "8",
    "N": "2",
    "M": "20",
    "COMMAND": "status",
}
"""A sample value for each placeholder the docs use; a new placeholder needs one here."""
STOPPED_SHORT = ("the following arguments are required", "expected one argument")
"""What a command named inside a sentence may lack: its action, an option's value."""
JOB = "#!/bin/bash\n#SBATCH --gres=gpu:1\npython train.py --arch resnet50 --epochs 90 -b 256 /data/imagenet\n"


@dataclass(frozen=True)
class Shown:
    """One command line as a doc shows it: where, its words, and whether a code block holds it."""

    where: str
    text: str
    in_block: bool


def shown_commands() -> list[Shown]:
    found: list[Shown] = []
    start = re.compile(rf"(?:\S*/)?(?:{'|'.join(PROGRAMS)})(?:\s|$)")
    for name in DOCS:
        text = (REPO / name).read_text()
        for block in re.finditer(r"```\w*\n(.*?)```", text, re.S):
            for offset, line in _lines(block.group(1), block.start(1)):
                command = line.strip().removeprefix("$ ")
                if start.match(command):
                    found.append(Shown(f"{name}:{text.count(chr(10), 0, offset) + 1}", command, True))
        prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        for code in re.finditer(r"`([^`\n]+)`", prose):
            if start.match(code.group(1)) and " " in code.group(1):
                found.append(
                    Shown(f"{name}:{text.count(chr(10), 0, code.start()) + 1}", code.group(1), False)
                )
    return found


def _lines(block: str, start: int) -> list[tuple[int, str]]:
    """The block's lines, a backslash continuation joined to its line, each with its offset."""
    joined, offset = [], start
    pending = ""
    for line in block.splitlines(keepends=True):
        pending += line.rstrip("\n").removesuffix("\\")
        if not line.rstrip("\n").endswith("\\"):
            joined.append((offset, pending))
            pending = ""
        offset += len(line)
    return joined


def concrete(text: str) -> list[list[str]]:
    """Every argv a synopsis stands for (after the program's name)."""

    def bracket(match: re.Match[str]) -> str:
        inner = match.group(1).replace("...", "").strip()
        return inner if inner.startswith("-") or inner in SAMPLES else ""

    flat = text
    while "[" in flat:
        flat = re.sub(r"\[([^\[\]]*)\]", bracket, flat)
    words = shlex.split(flat.replace("...", ""), comments=True)[1:]
    if "<" in words:  # a script on stdin
        del words[words.index("<") : words.index("<") + 2]
    choices = [word.split("|") if "|" in word and not word.startswith("-") else [word] for word in words]
    return [[SAMPLES.get(word, word) for word in argv] for argv in itertools.product(*choices)]


def advisor_refusal(argv: list[str]) -> str | None:
    """What `advisor`'s own parser says against `argv`, if anything (its usage and error lines)."""
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            cli._parser(load_settings({}), cli._command_word(argv)).parse_args(argv)
        except SystemExit as stop:
            return None if stop.code == 0 else errors.getvalue().strip()
    return None


def submit_refusal(argv: list[str]) -> str | None:
    """What advise-submit would refuse in `argv`: its own flags first, then `#ADVISOR` and sbatch options,
    through the parser that refuses what sbatch refuses (a small job script stands in for the one named)."""
    if argv == ["--help"]:
        return None
    _, rest = submit._flags(argv)
    description_args, sbatch_argv = split_command_line(rest)
    try:
        parse_job(JOB.encode(), "job.sh", sbatch_argv, {}, description_args)
    except ScriptError as error:
        return str(error)
    return None


SHOWN = shown_commands()


def test_the_docs_show_commands_of_both_programs() -> None:
    """The extraction finds them: some of each program, in blocks and in sentences, in every doc."""
    assert {shown.where.split(":")[0] for shown in SHOWN} == set(DOCS)
    assert {shown.text.split()[0].rsplit("/", 1)[-1] for shown in SHOWN} == set(PROGRAMS)
    assert {shown.in_block for shown in SHOWN} == {True, False}
    assert len(SHOWN) > 60


@pytest.mark.parametrize("shown", SHOWN, ids=lambda shown: f"{shown.where} {shown.text}")
def test_every_command_shown_is_one_the_program_accepts(shown: Shown) -> None:
    program = shown.text.split()[0].rsplit("/", 1)[-1]
    for argv in concrete(shown.text):
        said = advisor_refusal(argv) if program == "advisor" else submit_refusal(argv)
        if said is not None and not shown.in_block and any(short in said for short in STOPPED_SHORT):
            continue
        assert said is None, f"{shown.where}: {program} {shlex.join(argv)}: {said}"


@pytest.mark.parametrize(
    "words",
    [["--model=resnet18", "--frobnicate"], ["--partiton=a100"], ["-p", "a100", "--gpu-per-node=2"]],
)
def test_a_misspelt_option_is_caught(words: list[str]) -> None:
    assert submit_refusal([*words, "job.sh"]) is not None
    assert advisor_refusal(["parse", "--jsn", "job.sh"]) is not None
    assert advisor_refusal(["init-site", "/", "--prefx", "/opt"]) is not None
    assert advisor_refusal(["models", "activat", "a100", "1"]) is not None


def test_the_parse_commands_shown_run_as_documented(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`advisor parse` as the docs show it, on a job like theirs: `--json` carries the request, the
    description and the line it was inferred from, as the user guide says."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text(JOB)
    runs = [argv for shown in SHOWN for argv in concrete(shown.text) if argv[:1] == ["parse"]]
    assert ["parse", "--json", "job.sh"] in runs
    for argv in runs:
        argv = argv if "job.sh" in argv else [*argv, "job.sh"]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(argv) == 0, argv
        if "--json" in argv:
            parsed = json.loads(out.getvalue())
            assert {"request", "description", "inferred_from"} <= parsed.keys()
            assert parsed["inferred_from"].startswith("job.sh:3 (imagenet)")
        else:
            assert "job.sh" in out.getvalue()


def test_the_user_guide_lists_advise_submits_own_options() -> None:
    """The paragraph on `advise-submit --help` names exactly the options advise-submit takes as its own."""
    guide = (REPO / "docs" / "user-guide.md").read_text()
    paragraph = guide.split("`advise-submit --help` lists its own options:", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`(--[a-z-]+)`", paragraph))
    assert named == set(submit.OURS)
    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text):
        assert submit.main(["--help"]) == 0
    assert all(re.search(rf"^  {option} ", help_text.getvalue(), re.M) for option in named)


def test_the_user_guides_prompt_is_advise_submits() -> None:
    guide = (REPO / "docs" / "user-guide.md").read_text()
    assert submit.PROMPT.strip() in guide.splitlines()


def test_the_policy_checks_shown_pass_on_the_shipped_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    """`advisor policy check FILE` as shown, on each policy the wheel ships: valid, said in words."""
    monkeypatch.delenv("SLURM_CONF", raising=False)  # no cluster to compare names with: a note, not a failure
    checks = [argv for shown in SHOWN for argv in concrete(shown.text) if argv[:2] == ["policy", "check"]]
    assert checks, "the docs show policy check"
    for policy in sorted((REPO / "policies").glob("*.toml")):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(["policy", "check", str(policy)]) == 0, policy
        assert f"{policy}: valid" in " ".join(out.getvalue().split())
