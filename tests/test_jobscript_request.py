"""build_request: sources, precedence and value checks as sbatch 22.05 applies them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

import pytest

from advisor.jobscript.errors import ScriptError
from advisor.jobscript.render import render_directives, render_script
from advisor.jobscript.request import GpuRequest, JobRequest, build_request

SHEBANG = "#!/bin/bash\n"


def request(
    directives: str = "", argv: Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> JobRequest:
    return build_request(f"{SHEBANG}{directives}srun x\n", argv, environ or {}, "train.sh")


def refusal(
    directives: str = "", argv: Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> ScriptError:
    with pytest.raises(ScriptError) as caught:
        request(directives, argv, environ)
    return caught.value


def test_a_plain_script_sets_nothing() -> None:
    plain = request()
    assert plain.partitions == []
    assert (plain.gpus, plain.time_limit, plain.job_name, plain.hold) == (None, None, None, False)
    assert (plain.options, plain.het_components, plain.script_args) == ({}, 1, [])


def test_fields_come_from_the_directives() -> None:
    job = request(
        "#SBATCH -J train -p a100,v100 -t 1-2:30 --time-min=90 -N 2-4 -n 8 --ntasks-per-node=4 -c 3\n"
        "#SBATCH --mem=4G -A acct --qos=high --array=1-4 -d afterok:1 -o out -e err --export=NONE -H\n"
    )
    assert job.job_name == "train"
    assert job.partitions == ["a100", "v100"]
    assert (job.time_limit, job.time_min) == (timedelta(days=1, hours=2, minutes=30), timedelta(minutes=90))
    assert (job.nodes_min, job.nodes_max, job.ntasks, job.ntasks_per_node, job.cpus_per_task) == (
        2,
        4,
        8,
        4,
        3,
    )
    assert (job.mem_mb, job.mem_per_cpu_mb, job.mem_per_gpu_mb) == (4096, None, None)
    assert (job.account, job.qos, job.array, job.dependency) == ("acct", "high", "1-4", "afterok:1")
    assert (job.output, job.error, job.export, job.hold) == ("out", "err", "NONE", True)


def test_options_without_a_field_are_kept_for_pass_through() -> None:
    assert request("#SBATCH --mail-type=END --exclusive --constraint=ib\n").options == {
        "mail-type": "END",
        "exclusive": None,
        "constraint": "ib",
    }


def test_precedence_is_script_then_environment_then_command_line() -> None:
    script = "#SBATCH -t 10 -J script -p t4\n"
    environ = {"SBATCH_TIMELIMIT": "20", "SBATCH_JOB_NAME": "env"}
    job = request(script, ["-t", "30", "train.sh"], environ)
    assert (job.time_limit, job.job_name, job.partitions) == (timedelta(minutes=30), "env", ["t4"])
    assert job.options["time"] == "30"


def test_a_later_duplicate_wins_within_one_source() -> None:
    assert request("#SBATCH -t 5\n#SBATCH --time=7\n").time_limit == timedelta(minutes=7)


def test_the_script_path_ends_the_command_line_and_the_rest_are_script_arguments() -> None:
    job = request(argv=["-J", "x", "train.sh", "-t", "99"])
    assert (job.job_name, job.time_limit, job.script_args) == ("x", None, ["-t", "99"])


@pytest.mark.parametrize(
    ("value", "limit"),
    [
        ("90", timedelta(minutes=90)),
        ("5:30", timedelta(minutes=6)),
        ("1:60", timedelta(minutes=2)),
        ("1:02:03", timedelta(hours=1, minutes=3)),
        ("2-3", timedelta(days=2, hours=3)),
        ("2-3:04", timedelta(days=2, hours=3, minutes=4)),
        ("2-3:04:05", timedelta(days=2, hours=3, minutes=5)),
        ("2-", timedelta(days=2)),
        ("00:00:30", timedelta(minutes=1)),
        ("UNLIMITED", None),
        ("infinite", None),
        ("-1", None),
    ],
)
def test_every_slurm_time_format_rounds_up_to_minutes(value: str, limit: timedelta | None) -> None:
    assert request(argv=["-t", value]).time_limit == limit


@pytest.mark.parametrize("value", ["abc", "", " 5", "5 ", "1.5", "1:2:3:4", "-5", "NONE"])
def test_bad_times_are_refused_with_sbatchs_words(value: str) -> None:
    assert refusal(argv=[f"--time={value}"]).reason == "Invalid --time specification"


@pytest.mark.parametrize(
    ("argv", "gpus"),
    [
        (["--gres=gpu:2"], GpuRequest(count=2, type=None, per="node", option="gres")),
        (["--gres=gpu:a100:2"], GpuRequest(count=2, type="a100", per="node", option="gres")),
        (["--gres=gpu"], GpuRequest(count=1, type=None, per="node", option="gres")),
        (["--gres=gpu:t4"], GpuRequest(count=1, type="t4", per="node", option="gres")),
        (["--gres=gres:gpu:t4:2"], GpuRequest(count=2, type="t4", per="node", option="gres")),
        (["--gres=gpu:a100=3"], GpuRequest(count=3, type="a100", per="node", option="gres")),
        (["--gres=nvme:1,gpu:v100:2"], GpuRequest(count=2, type="v100", per="node", option="gres")),
        (["--gres=gpu:1k"], GpuRequest(count=1024, type=None, per="node", option="gres")),
        (["--gpus=2"], GpuRequest(count=2, type=None, per="job", option="gpus")),
        (["-G", "v100:1"], GpuRequest(count=1, type="v100", per="job", option="gpus")),
        (["--gpus=t4:1,v100:1"], GpuRequest(count=2, type=None, per="job", option="gpus")),
        (["--gpus-per-node=t4:2"], GpuRequest(count=2, type="t4", per="node", option="gpus-per-node")),
        (["--gpus-per-task=1"], GpuRequest(count=1, type=None, per="task", option="gpus-per-task")),
        (["--gres=gpu:1", "--gpus=2"], GpuRequest(count=2, type=None, per="job", option="gpus")),
    ],
)
def test_every_gpu_form(argv: list[str], gpus: GpuRequest) -> None:
    assert request(argv=argv).gpus == gpus


@pytest.mark.parametrize("argv", [["--gres=none"], ["--gres=nvme:1"], ["--gpus-per-socket=1"]])
def test_requests_without_job_node_or_task_gpus_have_none(argv: list[str]) -> None:
    assert request(argv=argv).gpus is None


@pytest.mark.parametrize(
    "value", ["gres/gpu:2", "gpu=2", "gpu:x:y", "gpu:2:a100", "gpu::1", "gpu:t4:-1", "gpu:t4:2(S:0)"]
)
def test_bad_gres_is_refused(value: str) -> None:
    assert refusal(argv=[f"--gres={value}"]).reason == "Invalid generic resource (gres) specification"


@pytest.mark.parametrize(
    "argv", [["--gres=gpu:t4:1,gpu:2"], ["--gpus=1,t4:1"], ["--gpus-per-node=t4:2", "--gpus=1"]]
)
def test_typed_and_untyped_gpus_may_not_mix(argv: list[str]) -> None:
    assert refusal(argv=argv).reason == "Invalid GRES specification (with and without type identification)"


@pytest.mark.parametrize(
    ("value", "nodes"), [("2", (2, 2)), ("2-4", (2, 4)), ("1k", (1024, 1024)), ("0", (0, 0))]
)
def test_node_counts_and_ranges(value: str, nodes: tuple[int, int]) -> None:
    job = request(argv=["-N", value])
    assert (job.nodes_min, job.nodes_max) == nodes


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("x", '"x" is not a valid node count'),
        ("4-2", "Maximum node count 2 is less than minimum node count 4"),
        ("2-", "Maximum node count -1 is less than minimum node count 2"),
    ],
)
def test_bad_node_counts_are_refused(value: str, reason: str) -> None:
    assert refusal(argv=["-N", value]).reason == reason


@pytest.mark.parametrize(
    ("option", "value"), [("ntasks", "0"), ("cpus-per-task", "0"), ("ntasks", "-1"), ("ntasks", "x")]
)
def test_counts_must_be_positive_integers(option: str, value: str) -> None:
    assert refusal(argv=[f"--{option}={value}"]).reason == f'Invalid numeric value "{value}" for --{option}.'


@pytest.mark.parametrize(
    ("value", "mb"),
    [("4000", 4000), ("4G", 4096), ("4g", 4096), ("4GB", 4096), ("1T", 1048576), ("100K", 1), ("0", 0)],
)
def test_memory_units(value: str, mb: int) -> None:
    assert request(argv=[f"--mem={value}"]).mem_mb == mb


@pytest.mark.parametrize("value", ["4.5G", "x", "4B", ""])
def test_bad_memory_is_refused(value: str) -> None:
    assert refusal(argv=[f"--mem-per-cpu={value}"]).reason == "Invalid --mem-per-cpu specification"


def test_two_memory_options_from_script_and_command_line_conflict() -> None:
    error = refusal("#SBATCH --mem=1G\n", ["--mem-per-gpu=1G"])
    assert (error.where, error.reason) == (
        "command line",
        "--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.",
    )


def test_a_memory_option_from_script_or_command_line_drops_a_different_one_from_the_environment() -> None:
    job = request("#SBATCH --mem-per-cpu=2G\n", environ={"SBATCH_MEM_PER_NODE": "1G"})
    assert (job.mem_mb, job.mem_per_cpu_mb) == (None, 2048)
    assert "mem" not in job.options


def test_two_memory_variables_conflict() -> None:
    error = refusal(environ={"SBATCH_MEM_PER_CPU": "1G", "SBATCH_MEM_PER_NODE": "1G"})
    assert (
        error.reason == "SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are mutually exclusive."
    )


def test_partition_lists_skip_empty_names_but_an_empty_partition_is_refused() -> None:
    assert request(argv=["-p", "t4,,a100"]).partitions == ["t4", "a100"]
    assert refusal(environ={"SBATCH_PARTITION": ""}).where == "SBATCH_PARTITION"


@pytest.mark.parametrize(("option", "value"), [("no-kill", "on"), ("exclusive", "topo")])
def test_checked_words_of_optional_arguments(option: str, value: str) -> None:
    assert refusal(argv=[f"--{option}={value}"]).reason == f"Invalid --{option} specification"


def test_checked_words_are_case_insensitive() -> None:
    assert request(argv=["--no-kill=OFF", "--exclusive=USER"]).options == {
        "no-kill": "OFF",
        "exclusive": "USER",
    }


def test_errors_name_the_script_line_or_the_variable() -> None:
    assert refusal("#SBATCH -J x\n#SBATCH -t soon\n").where == "train.sh:3"
    assert refusal(environ={"SBATCH_TIMELIMIT": "soon"}).where == "SBATCH_TIMELIMIT"
    assert refusal(argv=["--bogus"]).where == "command line"


def test_leftover_directive_words_are_invalid_directives() -> None:
    error = refusal("#SBATCH -J x\n#SBATCH -t 5 oops\n")
    assert (error.where, error.reason) == ("train.sh:3", "Invalid directive found in batch script: oops")


def test_the_whole_script_is_checked_first() -> None:
    with pytest.raises(ScriptError, match="DOS line breaks"):
        build_request("#!/bin/sh\r\ntrue\r\n", [], {}, "train.sh")


def test_hetjob_components_are_counted_and_all_checked() -> None:
    job = request("#SBATCH -J a -t 5\n#SBATCH hetjob\n#SBATCH -J b\n")
    assert (job.het_components, job.job_name, job.time_limit) == (2, "a", timedelta(minutes=5))
    assert refusal("#SBATCH -J a\n#SBATCH hetjob\n#SBATCH -t soon\n").where == "train.sh:4"


def test_command_line_colons_separate_components_and_the_last_segment_repeats() -> None:
    job = request("#SBATCH -J a\n#SBATCH hetjob\n#SBATCH hetjob\n", ["-t", "5", ":", "-t", "7"])
    assert (job.het_components, job.time_limit) == (3, timedelta(minutes=5))
    assert request(argv=["-N", "2", ":", "-N", "3", "train.sh"]).het_components == 2


def test_foreign_directives_are_reported_and_pbs_is_translated_as_sbatch_does() -> None:
    """sbatch reads #PBS (after #SBATCH, before the environment), never #BSUB; the differential corpus
    checks the same against the real sbatch."""
    job = request("#SBATCH -p t4\n#PBS -N x -q v100 -l walltime=1:00:00,nodes=2:ppn=4\n#BSUB -J y\n")
    assert (job.foreign_directives, job.job_name, job.partitions) == (["#PBS", "#BSUB"], "x", ["v100"])
    assert (job.time_limit, job.nodes_min, job.ntasks_per_node) == (timedelta(hours=1), 2, 4)
    assert request("#PBS -q v100\n", argv=["--ignore-pbs"]).partitions == []


def test_render_quotes_values_so_they_read_back_the_same() -> None:
    job = request(argv=['--comment=a "b" #c \\d', "--job-name=", "-H", "--nice=-5"])
    assert render_directives(job) == (
        '#SBATCH --comment="a \\"b\\" #c \\\\d"\n#SBATCH --job-name=\n#SBATCH --hold\n#SBATCH --nice="-5"\n'
    )
    again = build_request(render_script(job), [], {}, "train.sh")
    assert again == job.model_copy(update={"script": render_script(job)})


def test_render_keeps_other_header_lines_and_the_body() -> None:
    job = request("# keep me\n#SBATCH -t 5\n#ADVISOR apply\n")
    assert render_script(job) == f'{SHEBANG}# keep me\n#ADVISOR apply\n#SBATCH --time="5"\nsrun x\n'


def test_render_refuses_what_a_directive_line_cannot_hold() -> None:
    with pytest.raises(ValueError, match="newline"):
        render_directives(request(argv=["--comment=a\nb"]))
    with pytest.raises(ValueError, match="heterogeneous"):
        render_directives(request("#SBATCH hetjob\n"))


@pytest.mark.parametrize(
    ("directive", "argv"),
    [("-t abc", ["-t", "5"]), ("-N x", ["-N", "1"]), ("-n 0", ["-n", "1"]), ("--mem=1.5G", ["--mem=1G"])],
)
def test_a_bad_value_fails_even_when_a_later_source_overrides_it(directive: str, argv: list[str]) -> None:
    assert refusal(f"#SBATCH {directive}\n", argv).where == "train.sh:2"


def test_gpu_forms_are_checked_on_the_final_value_only() -> None:
    assert request("#SBATCH --gres=gpu:x:y\n", ["--gres=gpu:1"]).gpus == GpuRequest(
        count=1, type=None, per="node", option="gres"
    )
