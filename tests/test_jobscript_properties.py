"""Properties of the job-script parser: bytes survive, rendering round-trips, and only ScriptError escapes."""

from __future__ import annotations

import contextlib
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import check_script
from advisor.jobscript.option_table import OPTIONS
from advisor.jobscript.render import render_script
from advisor.jobscript.request import build_request

SCRIPT = "#!/bin/bash\n# header\nsrun train.py\n"
WORDS = [f"--{spec.name}" for spec in OPTIONS] + [f"-{spec.short}" for spec in OPTIONS if spec.short]
PIECES = [
    *WORDS,
    "=",
    ":",
    "--",
    "-",
    "hetjob",
    "gpu:",
    "a100:",
    "1-",
    "k",
    "'",
    '"',
    "\\",
    "#",
    " ",
    "\t",
    "0",
    "2",
]

LINE_STARTS = ["\n#SBATCH ", "\n#SBATCH", "\n#SLURM ", "\n#", "\n", "\n  #SBATCH ", "\nrun\n"]
VARIABLES = [
    "SBATCH_TIMELIMIT",
    "SBATCH_PARTITION",
    "SBATCH_GRES",
    "SBATCH_GPUS",
    "SBATCH_MEM_PER_NODE",
    "SBATCH_MEM_PER_CPU",
    "SBATCH_EXCLUSIVE",
    "SBATCH_NO_KILL",
    "SBATCH_JOB_NAME",
    "SBATCH_DEBUG",
]
# Few, cheap draws per example (10,000 of them must stay quick); known pieces reach more paths than noise.
pieces = st.lists(st.sampled_from(PIECES), max_size=12)
noise = st.text(max_size=4)


def fuzzed(tokens: list[str], extra: str, starts: list[str]) -> tuple[str, list[str], dict[str, str]]:
    """A script, an argv and an environment cut from one token list."""
    third = len(tokens) // 3
    lines = "".join(f"{starts[i % len(starts)]}{token}" for i, token in enumerate(tokens[:third]))
    args = ["".join(tokens[i : i + 2]) for i in range(third, 2 * third, 2)] + [extra]
    env = {VARIABLES[i % len(VARIABLES)]: token + extra for i, token in enumerate(tokens[2 * third :][:2])}
    return f"#!/bin/sh{lines}\n", args, env


@given(st.binary(max_size=200))
def test_check_script_gives_back_every_byte_it_accepts(data: bytes) -> None:
    for candidate in (data, b"#!" + data.replace(b"\0", b"").replace(b"\r\n", b"\n")):
        try:
            text = check_script(candidate, "job.sh")
        except ScriptError:
            continue
        assert text.encode("utf-8", errors="surrogateescape") == candidate


@settings(max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64), pieces, noise, st.lists(st.sampled_from(LINE_STARTS), min_size=1, max_size=2))
def test_the_parser_raises_only_script_error(
    data: bytes, tokens: list[str], extra: str, starts: list[str]
) -> None:
    script, args, env = fuzzed(tokens, extra, starts)
    for candidate in (data, script.encode("utf-8", errors="surrogateescape")):
        with contextlib.suppress(ScriptError):
            build_request(check_script(candidate, "job.sh"), args, env, "job.sh")


# Text as os.environ and argv can hold it: no lone surrogates but those that surrogateescape makes of bytes.
value_text = st.text(
    st.characters(exclude_characters="\n\0", exclude_categories=["Cs"])
    | st.sampled_from([chr(code) for code in range(0xDC80, 0xDD00)]),
    max_size=12,
)
name = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=6)
gpu_option = st.one_of(
    st.builds(lambda t, n: f"--gres=gpu:{t}:{n}", st.sampled_from(["a100", "t4"]), st.integers(0, 8)),
    st.builds(lambda n: f"--gres=gpu:{n}", st.integers(0, 8)),
    st.builds(lambda t, n: f"--gpus={t}{n}", st.sampled_from(["", "v100:"]), st.integers(0, 8)),
    st.builds(lambda n: f"--gpus-per-node={n}", st.integers(0, 8)),
    st.builds(lambda t: f"--gpus-per-task={t}:1", st.sampled_from(["a100", "t4"])),
)
modeled = st.lists(
    st.one_of(
        st.builds(
            lambda v: f"--time={v}",
            st.sampled_from(["90", "5:30", "1:02:03", "2-3", "1-0:0:1", "UNLIMITED", "2-"]),
        ),
        st.builds(lambda v: f"--partition={','.join(v)}", st.lists(name, min_size=1, max_size=3)),
        st.builds(lambda lo, extra: f"--nodes={lo}-{lo + extra}", st.integers(1, 9), st.integers(0, 9)),
        st.builds(lambda n: f"-n{n}", st.integers(1, 64)),
        st.builds(lambda n: f"--cpus-per-task={n}", st.integers(1, 64)),
        st.builds(
            lambda n, unit: f"--mem={n}{unit}",
            st.integers(0, 999),
            st.sampled_from(["", "K", "M", "G", "T", "GB"]),
        ),
        st.builds(lambda v: f"--job-name={v}", value_text),
        st.builds(lambda v: f"--comment={v}", value_text),
        st.builds(lambda v: f"--export={v}", value_text),
        st.sampled_from(["--hold", "-H", "--nice", "--nice=5", "--exclusive", "--requeue", "-v"]),
    ),
    max_size=10,
)
accounting = st.dictionaries(
    st.sampled_from(["SBATCH_ACCOUNT", "SBATCH_QOS", "SBATCH_OVERCOMMIT"]), value_text
)


@settings(max_examples=300, deadline=None)
@given(modeled, st.lists(gpu_option, max_size=1), accounting)
def test_rendering_a_request_reads_back_as_the_same_request(
    args: list[str], gpus: list[str], env: dict[str, str]
) -> None:
    """For any request built from options (one GPU form: mixing typed and untyped ones is refused)."""
    request = build_request(SCRIPT, args + gpus, env, "job.sh")
    rendered = render_script(request)
    again = build_request(rendered, [], {}, "job.sh")
    assert again == request.model_copy(update={"script": rendered})
    assert render_script(again) == rendered
