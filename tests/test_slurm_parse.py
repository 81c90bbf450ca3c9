"""Pure parser tests against output captured from Slurm 22.05 and hand-written variants of other versions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.slurm.models import Gpus, Node
from advisor.slurm.parse import (
    build_partitions,
    parse_owner,
    parse_sacct_json,
    parse_scontrol_records,
    parse_sinfo_json,
    parse_squeue_json,
    parse_submit,
    parse_test_only,
)
from advisor.slurm.values import format_duration, parse_duration, parse_gres, parse_memory_mb, parse_tres

DATA = Path(__file__).parent / "data" / "slurm"
PARTITION_LINE = (
    "PartitionName=a100 AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=NO QoS=N/A "
    "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED "
    "MaxTime=2-00:00:00 MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=a100-[1-2] PriorityJobFactor=1 "
    "PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=UP "
    "TotalCPUs=32 TotalNodes=2 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED "
    "MaxMemPerNode=UNLIMITED TRES=cpu=32,mem=125G,node=2,billing=32"
)
CPU_PARTITION_LINE = (
    "PartitionName=cpu Default=YES DefaultTime=00:10:00 MaxTime=UNLIMITED State=UP TotalCPUs=2"
)


def sample(name: str) -> str:
    return (DATA / f"{name}-22.05.json").read_text()


def at(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


# --- durations -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5", timedelta(minutes=5)),
        ("90", timedelta(minutes=90)),
        ("5:30", timedelta(minutes=5, seconds=30)),
        ("01:02:03", timedelta(hours=1, minutes=2, seconds=3)),
        ("2-12", timedelta(days=2, hours=12)),
        ("2-12:30", timedelta(days=2, hours=12, minutes=30)),
        ("2-00:00:00", timedelta(days=2)),
        ("1-02:03:04", timedelta(days=1, hours=2, minutes=3, seconds=4)),
        (" 0 ", timedelta(0)),
        ("UNLIMITED", None),
        ("infinite", None),
        ("NONE", None),
        ("N/A", None),
    ],
)
def test_parse_duration_forms(text: str, expected: timedelta | None) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1:2:3:4", "-5", "1-", "1-2-3", "5m", "1.5"])
def test_parse_duration_rejects_garbage_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="not a Slurm duration") as caught:
        parse_duration(text)
    assert repr(text) in str(caught.value)


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3650)))
def test_duration_round_trip(limit: timedelta) -> None:
    whole = timedelta(seconds=int(limit.total_seconds()))
    assert parse_duration(format_duration(whole)) == whole


@given(
    st.integers(0, 400),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
)
def test_every_slurm_form_parses_to_its_components(days: int, hours: int, minutes: int, seconds: int) -> None:
    assert parse_duration(f"{days}-{hours}:{minutes:02d}:{seconds:02d}") == timedelta(
        days=days, hours=hours, minutes=minutes, seconds=seconds
    )
    assert parse_duration(f"{days}-{hours}:{minutes}") == timedelta(days=days, hours=hours, minutes=minutes)
    assert parse_duration(f"{days}-{hours}") == timedelta(days=days, hours=hours)
    assert parse_duration(f"{hours}:{minutes}:{seconds}") == timedelta(
        hours=hours, minutes=minutes, seconds=seconds
    )
    assert parse_duration(f"{minutes}:{seconds}") == timedelta(minutes=minutes, seconds=seconds)


def test_format_duration() -> None:
    assert format_duration(None) == "UNLIMITED"
    assert format_duration(timedelta(minutes=90)) == "01:30:00"
    assert format_duration(timedelta(days=2, seconds=1)) == "2-00:00:01"
    assert format_duration(timedelta(seconds=0.2)) == "00:00:01"
    with pytest.raises(ValueError, match="negative"):
        format_duration(timedelta(seconds=-1))


# --- memory, tres, gres ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100", 100),
        ("100M", 100),
        ("62.50G", 64000),
        ("125G", 128000),
        ("1T", 1048576),
        ("2048K", 2),
        ("1K", 1),
    ],
)
def test_parse_memory_mb(text: str, expected: int) -> None:
    assert parse_memory_mb(text) == expected


@pytest.mark.parametrize("text", ["", "G", "12X", "1.2.3G", "-1M"])
def test_parse_memory_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="not a Slurm memory size"):
        parse_memory_mb(text)


def test_parse_tres() -> None:
    assert parse_tres("cpu=1,mem=100M,node=1,billing=1,gres/gpu=2,gres/gpu:a100=2") == {
        "cpu": "1",
        "mem": "100M",
        "node": "1",
        "billing": "1",
        "gres/gpu": "2",
        "gres/gpu:a100": "2",
    }
    assert parse_tres("") == {}
    assert parse_tres("(null)") == {}
    with pytest.raises(ValueError, match="bad item 'mem'"):
        parse_tres("cpu=1,mem")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu:a100:4", Gpus(type="a100", count=4)),
        ("gpu:4", Gpus(type=None, count=4)),
        ("gpu:a100", Gpus(type="a100", count=1)),
        ("gpu", Gpus(type=None, count=1)),
        ("gres:gpu:a100:2", Gpus(type="a100", count=2)),
        ("gres/gpu:2", Gpus(type=None, count=2)),
        ("gres/gpu:a100=2", Gpus(type="a100", count=2)),
        ("gpu:a100:4(S:0-1)", Gpus(type="a100", count=4)),
        ("gpu:a100:0(IDX:N/A)", Gpus(type="a100", count=0)),
        ("gpu:a100:2(IDX:0,2)", Gpus(type="a100", count=2)),
        ("gpu:a100:2(IDX:0-1),shard:8", Gpus(type="a100", count=2)),
        ("gpu:a100:2,gpu:v100:2", Gpus(type=None, count=4)),
        ("gpu:0", Gpus(type=None, count=0)),
        ("shard:8", None),
        ("", None),
        ("(null)", None),
    ],
)
def test_parse_gres(text: str, expected: Gpus | None) -> None:
    assert parse_gres(text) == expected


def test_parse_gres_rejects_bad_counts() -> None:
    with pytest.raises(ValueError, match="not a gres specification"):
        parse_gres("gpu:a100:lots")
    with pytest.raises(ValueError, match="too many fields"):
        parse_gres("gpu:a:b:c:d")


# --- scontrol --------------------------------------------------------------------------------------


def test_scontrol_partition_record_keeps_tres_whole() -> None:
    [record] = parse_scontrol_records(PARTITION_LINE + "\n")
    assert record["PartitionName"] == "a100"
    assert record["MaxTime"] == "2-00:00:00"
    assert record["Nodes"] == "a100-[1-2]"
    assert record["TRES"] == "cpu=32,mem=125G,node=2,billing=32"
    assert "cpu" not in record


def test_scontrol_values_with_spaces_and_odd_keys() -> None:
    text = (
        "NodeName=a100-1 Arch=x86_64 CoresPerSocket=1 OS=Linux 6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC @0 "
        "RealMemory=64000 Reason=Not responding [slurm@2026-01-01T00:00:00]\n"
        "\n"
        "JobId=7 JobName=my job AllocNode:Sid=localhost:1108 CPUs/Task=1 Comment= Gres.Used=x\n"
    )
    node, job = parse_scontrol_records(text)
    assert node["OS"] == "Linux 6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC @0"
    assert node["Reason"] == "Not responding [slurm@2026-01-01T00:00:00]"
    assert job == {
        "JobId": "7",
        "JobName": "my job",
        "AllocNode:Sid": "localhost:1108",
        "CPUs/Task": "1",
        "Comment": "",
        "Gres.Used": "x",
    }


def test_scontrol_empty_outputs() -> None:
    assert parse_scontrol_records("") == []
    assert parse_scontrol_records("No partitions in the system\n") == []


def test_scontrol_garbage_names_the_line() -> None:
    with pytest.raises(ValueError, match="not a Key=Value record: 'slurm_load_jobs error"):
        parse_scontrol_records("slurm_load_jobs error: Invalid job id specified")
    with pytest.raises(ValueError, match="not a Key=Value record"):
        parse_scontrol_records(" =5 A=1")


# --- sinfo / partitions ----------------------------------------------------------------------------


def test_sinfo_golden() -> None:
    nodes = {node.name: node for node in parse_sinfo_json(sample("sinfo"))}
    assert sorted(nodes) == ["a100-1", "a100-2", "cpu-1", "t4-1", "v100-1"]
    assert nodes["a100-1"] == Node(
        name="a100-1",
        state="IDLE",
        flags=[],
        partitions=["a100"],
        cpus=16,
        alloc_cpus=0,
        memory_mb=64000,
        alloc_memory_mb=0,
        gpus=Gpus(type="a100", count=4),
        gpus_used=0,
    )
    assert nodes["cpu-1"].gpus is None
    assert nodes["v100-1"].gpus == Gpus(type="v100", count=2)


def test_sinfo_23_style_states_and_numbers() -> None:
    node = json.loads(sample("sinfo"))["nodes"][0]
    node.update(
        state=["MIXED", "DRAIN"],
        alloc_cpus={"set": True, "infinite": False, "number": 4},
        gres_used="gpu:a100:2(IDX:0-1)",
    )
    del node["state_flags"]
    [parsed] = parse_sinfo_json(json.dumps({"nodes": [node]}))
    assert (parsed.state, parsed.flags, parsed.alloc_cpus, parsed.gpus_used) == ("MIXED", ["DRAIN"], 4, 2)


def test_build_partitions_joins_nodes() -> None:
    nodes = parse_sinfo_json(sample("sinfo"))
    a100, cpu = build_partitions(parse_scontrol_records(f"{PARTITION_LINE}\n{CPU_PARTITION_LINE}\n"), nodes)
    assert a100.name == "a100"
    assert (a100.state, a100.is_default, a100.total_cpus) == ("UP", False, 32)
    assert (a100.max_time, a100.default_time) == (timedelta(days=2), None)
    assert a100.node_names == ["a100-1", "a100-2"]
    assert (a100.gpu_type, a100.gpus_per_node, a100.cpus_per_node, a100.memory_per_node_mb) == (
        "a100",
        4,
        16,
        64000,
    )
    assert [node.name for node in a100.nodes] == a100.node_names
    assert (cpu.is_default, cpu.max_time, cpu.default_time) == (True, None, timedelta(minutes=10))
    assert (cpu.gpu_type, cpu.gpus_per_node) == (None, 0)


def test_build_partitions_needs_a_name() -> None:
    with pytest.raises(ValueError, match="no PartitionName"):
        build_partitions([{"State": "UP"}], [])


# --- squeue ----------------------------------------------------------------------------------------


def test_squeue_golden() -> None:
    first, second, third = parse_squeue_json(sample("squeue"))
    assert (first.job_id, first.user, first.uid, first.partition, first.state) == (
        1,
        "root",
        0,
        "cpu",
        "RUNNING",
    )
    assert (first.array_job_id, first.array_task_id) == (None, None)
    assert first.submit_time == at(1796029486)
    assert first.end_time == at(1796029546)
    assert first.time_limit == timedelta(minutes=1)
    assert first.tres_requested == {"cpu": "1", "mem": "100M", "node": "1", "billing": "1"}
    assert (first.gpus, first.gpu_type, first.node_list) == (0, None, "cpu-1")
    assert (second.gpus, second.gpu_type) == (2, "a100")  # from tres_per_node
    assert (third.gpus, third.gpu_type, third.state) == (1, None, "COMPLETED")  # from tres_per_job


def _job(**changes: object) -> dict[str, object]:
    job: dict[str, object] = json.loads(sample("squeue"))["jobs"][0]
    job.update(changes)
    return job


def test_squeue_pending_unlimited_array_and_accounting_tres() -> None:
    pending = _job(
        job_state="PENDING",
        state_reason="Resources",
        start_time=0,
        end_time=0,
        time_limit=4294967295,
        array_job_id=10,
        array_task_id=3,
        tres_req_str="cpu=4,mem=1G,node=2,billing=4,gres/gpu=4,gres/gpu:v100=4",
        tres_per_node="gres:gpu:2",
        node_count=2,
    )
    estimated = _job(
        job_state=["PENDING"], start_time=1796030000, time_limit={"set": False, "infinite": True}
    )
    [job, later] = parse_squeue_json(json.dumps({"jobs": [pending, estimated]}))
    assert (job.state, job.reason, job.start_time, job.end_time, job.time_limit) == (
        "PENDING",
        "Resources",
        None,
        None,
        None,
    )
    assert (job.array_job_id, job.array_task_id) == (10, 3)
    assert (job.gpus, job.gpu_type) == (4, "v100")
    assert (later.state, later.start_time, later.time_limit) == ("PENDING", at(1796030000), None)


def test_squeue_gpus_per_node_and_task_scale() -> None:
    per_node = _job(tres_per_node="gres:gpu:a100:2", node_count=3)
    per_task = _job(tres_per_task="gres/gpu=1", tasks=4)
    detail = _job(gres_detail=["gpu:t4:2(IDX:0-1)", "gpu:t4:1(IDX:3)"])
    assert [
        (job.gpus, job.gpu_type)
        for job in parse_squeue_json(json.dumps({"jobs": [per_node, per_task, detail]}))
    ] == [
        (6, "a100"),
        (4, None),
        (3, "t4"),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("garbage", "squeue output is not JSON"),
        ("", "squeue output is not JSON"),
        ('{"errors": [{"error": "boom"}]}', "squeue reported errors: boom"),
        ('{"errors": [{"description": "Nothing found"}, {"error": "boom"}], "jobs": []}', "boom"),
        ('{"errors": [], "meta": {}}', "no 'jobs' list"),
        ('{"jobs": [1]}', "non-objects"),
        ('{"jobs": [{"job_id": 1}]}', "job record has no 'user_id'"),
        ('{"jobs": [{"job_id": 1, "user_id": 0, "job_state": 5}]}', "not a Slurm state: 5"),
    ],
)
def test_squeue_malformed(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_squeue_json(text)


def test_squeue_missing_submit_time() -> None:
    with pytest.raises(ValueError, match="no 'submit_time' time"):
        parse_squeue_json(json.dumps({"jobs": [_job(submit_time=0)]}))


def test_oddly_shaped_records_give_value_error() -> None:
    with pytest.raises(ValueError, match="unexpected sacct job record"):
        parse_sacct_json('{"jobs": [{"time": 5, "state": "X"}]}')
    with pytest.raises(ValueError, match="not JSON"):
        parse_sinfo_json("\xff\xfe garbage")


# --- sacct -----------------------------------------------------------------------------------------


def test_sacct_golden() -> None:
    jobs = parse_sacct_json(sample("sacct"))
    assert [job.job_id for job in jobs] == [1, 2, 3, 5, 6]
    first, last = jobs[0], jobs[-1]
    assert (first.name, first.user, first.partition, first.state) == ("wrap", "root", "cpu", "COMPLETED")
    assert (first.submit_time, first.start_time, first.end_time) == (
        at(1796029486),
        at(1796029486),
        at(1796029491),
    )
    assert (first.elapsed, first.time_limit, first.node_count, first.exit_code) == (
        timedelta(seconds=5),
        timedelta(minutes=1),
        1,
        0,
    )
    assert first.alloc_tres == {"cpu": "1", "mem": "100", "node": "1", "billing": "1"}
    assert (first.gpus, last.gpus) == (0, 2)
    assert last.alloc_tres["gres/gpu"] == "2"


def test_sacct_skips_unfinished_and_reads_23_style() -> None:
    document = json.loads(sample("sacct"))
    running, newer = document["jobs"][0], document["jobs"][-1]
    running["time"]["end"] = 0
    newer["state"] = {"current": ["FAILED"], "reason": "None"}
    newer["time"]["limit"] = {"set": True, "infinite": False, "number": 30}
    newer["exit_code"] = {"status": ["FAILED"], "return_code": {"set": True, "infinite": False, "number": 2}}
    newer["array"].update(job_id=20, task_id={"set": True, "infinite": False, "number": 1})
    newer["tres"]["allocated"].append({"type": "gres", "name": "gpu:a100", "id": 1002, "count": 2})
    [job] = parse_sacct_json(json.dumps({"jobs": [running, newer]}))
    assert (job.state, job.time_limit, job.exit_code) == ("FAILED", timedelta(minutes=30), 2)
    assert (job.array_job_id, job.array_task_id) == (20, 1)
    assert (job.gpus, job.alloc_tres["gres/gpu:a100"]) == (2, "2")


def test_sacct_malformed() -> None:
    with pytest.raises(ValueError, match="sacct JSON has no 'jobs' list"):
        parse_sacct_json('{"meta": {}}')
    with pytest.raises(ValueError, match="sacct job record has no 'time'"):
        parse_sacct_json('{"jobs": [{"job_id": 1}]}')


# --- sbatch ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdout", "parsable", "job_id", "cluster"),
    [
        ("Submitted batch job 7\n", False, 7, None),
        ("Submitted batch job 7 on cluster sandbox\n", False, 7, "sandbox"),
        ("7\n", True, 7, None),
        ("7;sandbox\n", True, 7, "sandbox"),
        ("\n12345\n\n", True, 12345, None),
    ],
)
def test_parse_submit(stdout: str, parsable: bool, job_id: int, cluster: str | None) -> None:
    result = parse_submit(stdout, parsable)
    assert (result.job_id, result.cluster) == (job_id, cluster)


@pytest.mark.parametrize(("stdout", "parsable"), [("", True), ("", False), ("oops", True), ("7", False)])
def test_parse_submit_garbage(stdout: str, parsable: bool) -> None:
    with pytest.raises(ValueError, match="no job id in sbatch output"):
        parse_submit(stdout, parsable)


def test_parse_test_only_iso_epoch_and_zone() -> None:
    iso = parse_test_only(
        "sbatch: Job 4 to start at 2026-11-30T09:04:46 using 1 processors on nodes v100-1 in partition v100\n"
    )
    assert (iso.job_id, iso.start_time, iso.processors, iso.nodes, iso.partition) == (
        4,
        datetime(2026, 11, 30, 9, 4, 46, tzinfo=UTC),
        1,
        "v100-1",
        "v100",
    )
    epoch = parse_test_only(
        "sbatch: warning: something\nsbatch: Job 9 to start at 1796029486 using 32 processors on nodes "
        "a100-[1-2] in partition a100"
    )
    assert (epoch.start_time, epoch.processors, epoch.nodes) == (at(1796029486), 32, "a100-[1-2]")
    local = parse_test_only(
        "Job 5 to start at 2026-11-30T10:04:46 using 1 processor on node t4-1 in partition t4",
        local_tz=timezone(timedelta(hours=1)),
    )
    assert local.start_time == datetime(2026, 11, 30, 9, 4, 46, tzinfo=UTC)


def test_parse_test_only_garbage() -> None:
    with pytest.raises(ValueError, match=r"no start estimate.*invalid partition"):
        parse_test_only("sbatch: error: invalid partition specified: nope")


def test_sacct_nothing_found_is_an_empty_answer() -> None:
    text = (
        '{"meta": {}, "errors": [{"description": "Nothing found", "error": "Nothing found with query",'
        ' "source": "slurmdb_jobs_get"}], "jobs": []}'
    )
    assert parse_sacct_json(text) == []


def test_an_owner_is_one_uid_or_none() -> None:
    assert parse_owner("  1001\n") == 1001
    assert parse_owner("\n") is None
    assert parse_owner("1001\n1001\n") == 1001, "an array's started tasks, a line each"
    for text in ("1001\n1002\n", "alice\n", "-1\n"):
        with pytest.raises(ValueError, match="not one uid"):
            parse_owner(text)
