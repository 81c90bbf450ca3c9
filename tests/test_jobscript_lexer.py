"""sbatch's script checks and directive tokenizer, rule by rule (each checked against sbatch 22.05.8)."""

from __future__ import annotations

import pytest

from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import SBATCH_PREFIXES, Directive, body_start, check_script, read_directives

SHEBANG = "#!/bin/sh\n"


def args(text: str, prefix: str | tuple[str, ...] = "#SBATCH") -> list[tuple[str, ...]]:
    return [directive.args for directive in read_directives(text, prefix, "job.sh")]


def refusal(text: str) -> ScriptError:
    with pytest.raises(ScriptError) as caught:
        read_directives(text, "#SBATCH", "job.sh")
    return caught.value


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "Batch script is empty!"),
        (b" \n\t\v\f\r\n", "Batch script contains only whitespace!"),
        (b"\x00#!/bin/sh\n", "Batch script contains only whitespace!"),
        (b"echo hi\n", "This does not look like a batch script."),
        (b" #!/bin/sh\n", "This does not look like a batch script."),
        (b"#!/bin/sh\ntrue\x00\n", "contain a NULL character '\\0'."),
        (b"#!/bin/sh\r\ntrue\x00\n", "contain a NULL character"),
        (b"#!/bin/sh\ntrue\r\n", "DOS line breaks (\\r\\n)"),
    ],
)
def test_check_script_refuses_what_sbatch_refuses_in_its_order(data: bytes, reason: str) -> None:
    with pytest.raises(ScriptError) as caught:
        check_script(data, "job.sh")
    assert caught.value.where == "job.sh"
    assert reason in caught.value.reason
    assert str(caught.value) == f"job.sh: {caught.value.reason}"


@pytest.mark.parametrize("data", [b"#!", b"#!/bin/sh\ntrue\rfalse\n", b"#!/bin/sh\n\xff\xfe caf\xc3\xa9\n"])
def test_check_script_accepts_lone_carriage_returns_and_any_bytes(data: bytes) -> None:
    assert check_script(data, "job.sh").encode("utf-8", errors="surrogateescape") == data


def test_directives_keep_line_numbers_and_raw_text() -> None:
    text = SHEBANG + "#SBATCH -J x\n\n#SBATCH -t 5 # five\n"
    assert read_directives(text, "#SBATCH", "job.sh") == [
        Directive(line=2, args=("-J", "x"), text="#SBATCH -J x"),
        Directive(line=4, args=("-t", "5"), text="#SBATCH -t 5 # five"),
    ]


def test_blank_and_comment_lines_do_not_end_the_block() -> None:
    text = SHEBANG + "\n# note\n   \n\t# indented\n#SBATCH -t 5\n"
    assert args(text) == [("-t", "5")]


def test_the_first_command_ends_the_block() -> None:
    assert args(SHEBANG + "#SBATCH -t 3\necho hi\n#SBATCH -t 9\n") == [("-t", "3")]


def test_indented_or_lower_case_prefixes_are_plain_comments() -> None:
    assert args(SHEBANG + "  #SBATCH -t 1\n#sbatch -t 2\n#SBATCH -t 3\n") == [("-t", "3")]


def test_no_whitespace_is_needed_after_the_prefix() -> None:
    assert args(SHEBANG + "#SBATCH--time=5\n#SBATCHX\n") == [("--time=5",), ("X",)]


def test_sbatch_still_reads_the_old_slurm_prefix() -> None:
    assert args(SHEBANG + "#SLURM -t 5\n#SBATCH -J x\n", SBATCH_PREFIXES) == [("-t", "5"), ("-J", "x")]


def test_other_prefixes_follow_the_same_placement_rules() -> None:
    text = SHEBANG + "#ADVISOR apply\n#SBATCH -t 5\n#ADVISOR 'max gpus' 4\nrun\n#ADVISOR late\n"
    assert args(text, "#ADVISOR") == [("apply",), ("max gpus", "4")]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('-J "two words"', ("-J", "two words")),
        ('-J \'a"b\'c"d e"', ("-J", 'a"bcd e')),
        ('-J a\\"b\\\\c', ("-J", 'a"b\\c')),
        ("-J a\\ b", ("-J", "a", "b")),
        ('-J "a\\"b"', ("-J", 'a"b')),
        ("-J ab\\", ("-J", "ab")),
        ('-J "a#b" # trailing', ("-J", "a#b")),
        ("-J a#b c", ("-J", "a")),
        ("\t-J\tx", ("-J", "x")),
        ("--comment '' -J x", ("--comment",)),
        ("", ()),
    ],
)
def test_arguments_split_like_get_argument(line: str, expected: tuple[str, ...]) -> None:
    assert args(f"{SHEBANG}#SBATCH {line}\n") == [expected]


def test_unmatched_quote_names_the_line_and_the_rest_of_it() -> None:
    error = refusal(SHEBANG + "#SBATCH -J 'abc\n")
    assert (error.where, error.reason) == ("job.sh:2", "Unmatched `'` in [ 'abc]")


@pytest.mark.parametrize(("line", "shown"), [("#SBATCH : -N1", "[: -N1]"), ("#SBATCH -J a :", "[ :]")])
def test_a_colon_where_an_argument_starts_is_refused(line: str, shown: str) -> None:
    assert refusal(f"{SHEBANG}{line}\n").reason == f"Unexpected `:` in {shown}"


def test_a_hetjob_line_separates_components_and_loses_its_other_words() -> None:
    text = SHEBANG + "#SBATCH -J a\n#SBATCH   HetJob -J lost\n#SBATCH packjob\n"
    directives = read_directives(text, "#SBATCH", "job.sh")
    assert [(d.args, d.separator) for d in directives] == [
        (("-J", "a"), False),
        (("hetjob",), True),
        (("hetjob",), True),
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("-t 5 hetjob -J lost", ("-t", "5")),
        ("--comment hetjob", ("--comment",)),
        ("-J myhetjob", ("-J", "myhetjob")),
        ("hetjobs", ("hetjobs",)),
        ("hetjob#c", ("hetjob",)),
        ("'hetjob'", ("hetjob",)),
    ],
)
def test_a_bare_hetjob_word_elsewhere_ends_the_line_without_separating(
    line: str, expected: tuple[str, ...]
) -> None:
    [directive] = read_directives(f"{SHEBANG}#SBATCH {line}\n", "#SBATCH", "job.sh")
    assert (directive.args, directive.separator) == (expected, False)


@pytest.mark.parametrize(
    ("text", "start"),
    [
        (SHEBANG + "#SBATCH -t 5\necho hi\n", len(SHEBANG + "#SBATCH -t 5\n")),
        (SHEBANG + "#SBATCH -t 5", len(SHEBANG + "#SBATCH -t 5")),
        (SHEBANG + "echo\n", len(SHEBANG)),
        ("", 0),
    ],
)
def test_body_start_is_where_the_first_command_begins(text: str, start: int) -> None:
    assert body_start(text) == start


def test_a_script_over_slurmctlds_4_mib_is_refused_with_sbatchs_words() -> None:
    head = b"#!/bin/sh\ntrue\n"
    largest = head + b"#" * (4 * 2**20 - len(head) - 1) + b"\n"
    assert len(check_script(largest, "job.sh")) == 4 * 2**20
    with pytest.raises(ScriptError, match="Pathname of a file, directory or other parameter too long"):
        check_script(largest + b"\n", "job.sh")
