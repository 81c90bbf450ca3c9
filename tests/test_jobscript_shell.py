"""A script's shell as far as its training command needs it (`advisor.jobscript.shell`): arguments kept in
variables, strings over several lines and arrays, here-documents passed over. Such scripts described no
job, and said nothing of why."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.jobscript.launchers import UNKNOWN, words_of
from advisor.jobscript.shell import assigned, commands_of, logical_lines, moved, within, written_to
from advisor.jobscript.submission import parse_job, parse_submission

HEADER = "#!/bin/bash\n#SBATCH --gres=gpu:4\n#SBATCH --time=10:00:00\n"
STRINGS = """MODEL_ARGS="--model_name_or_path gpt2 --block_size 512"
TRAIN_ARGS="
    --per_device_train_batch_size 8 \\
    --max_steps 2000 \\
    --bf16
"
torchrun --nproc_per_node 4 run_clm.py $MODEL_ARGS $TRAIN_ARGS --output_dir out
"""
ARRAYS = """ARGS=(
    --model_name_or_path gpt2   # the model
    --per_device_train_batch_size 8
)
ARGS+=(--max_steps 2000)  # appended
torchrun --nproc_per_node 4 run_clm.py "${ARGS[@]}" --output_dir out
"""
HERE_DOCUMENT = """cat > accelerate.yaml <<'EOF'
# don't edit: it's written by the job
num_processes: 4
EOF
cat <<< "it's a here-string"
python run_clm.py --model_name_or_path gpt2 --per_device_train_batch_size 8 --max_steps 2000 --output_dir o
"""


def _described(tmp_path: Path, body: str) -> dict[str, object]:
    script = tmp_path / "job.sh"
    text = HEADER + body
    parsed = parse_job(text.encode(), str(script), [str(script)], {})
    assert parsed.description is not None, parsed.undescribed
    return parsed.description.model_dump() | {"from": parsed.inferred_from}


def test_arguments_in_strings_over_several_lines_are_the_commands_words(tmp_path: Path) -> None:
    described = _described(tmp_path, STRINGS)
    expected = {
        "model": "hf:gpt2",
        "sequence_length": 512,
        "global_batch": 32,
        "steps": 2000,
        "own_amp": True,
    }
    assert {key: described[key] for key in expected} == expected
    assert str(described["from"]).startswith(f"{tmp_path / 'job.sh'}:10 (hf): torchrun --nproc_per_node 4 ")


def test_arguments_in_an_array_with_comments_and_an_append_are_its_elements(tmp_path: Path) -> None:
    described = _described(tmp_path, ARRAYS)
    expected = {"model": "hf:gpt2", "global_batch": 32, "steps": 2000}
    assert {key: described[key] for key in expected} == expected


def test_a_here_documents_body_is_not_read_as_commands(tmp_path: Path) -> None:
    """Its apostrophes would otherwise open a quote that swallows the training command."""
    described = _described(tmp_path, HERE_DOCUMENT)
    assert described["model"] == "hf:gpt2" and described["steps"] == 2000
    assert str(described["from"]).startswith(f"{tmp_path / 'job.sh'}:9 (hf): python run_clm.py")


def test_logical_lines_start_where_they_start_and_close_where_the_shell_closes_them() -> None:
    lines = logical_lines(HEADER + STRINGS)
    assert [line.number for line in lines] == [4, 5, 10]
    assert lines[1].text.startswith('TRAIN_ARGS="\n') and lines[1].text.endswith('--bf16\n"')
    arrays = logical_lines(ARRAYS)
    assert [line.number for line in arrays] == [1, 5, 6]


def test_a_value_keeps_its_words_and_marks_what_only_the_run_knows() -> None:
    variables: dict[str, str | None] = {"BS": "8"}
    name, value = assigned("EXTRA=\"--batch $BS --workers $(nproc) --tag 'a b'\"", variables) or ("", None)
    assert name == "EXTRA" and value is not None
    variables[name] = value
    assert words_of("run.py $EXTRA", variables) == [
        "run.py",
        "--batch",
        "8",
        "--workers",
        UNKNOWN,
        "--tag",
        "a b",
    ]
    assert assigned("N=$(nproc)", variables) == ("N", None)
    assert assigned("export LR=0.1", variables) == ("LR", "0.1")
    assert assigned("python train.py", variables) is None
    assert assigned("A=1 python train.py", variables) is None, "a command's own environment"


def test_every_script_of_the_job_reading_benchmark_is_read_as_expected_or_says_why() -> None:
    """benchmarks/jobs: scripts as their projects' READMEs write them, each with its reading worked out by
    hand (``# expected:``); none may fail to be read (a recipe named at run time made `advisor parse` fail
    with "embedded null byte"), be read otherwise (a detection job read as a classifier), or say nothing."""
    from benchmarks.job_reading import JOBS, expected, read, row

    scripts = sorted(JOBS.glob("*.sh"))
    assert len(scripts) >= 40 and all(expected(script) for script in scripts)
    verdicts = {script.name: row(script, read(script))[-1] for script in scripts}
    bad = ("wrong", "silent", "failed")
    assert {name: verdict for name, verdict in verdicts.items() if verdict in bad} == {}


def test_a_lines_commands_are_split_where_the_shell_splits_them() -> None:
    words = words_of("module load cuda && cd /work; srun python train.py --lr 1 | tee log &", {})
    assert commands_of(words) == [
        ["module", "load", "cuda"], ["cd", "/work"], ["srun", "python", "train.py", "--lr", "1"],
        ["tee", "log"],
    ]  # fmt: skip


def test_cd_moves_where_files_are_read_from() -> None:
    assert moved("", ["/work/nanoGPT"]) == "/work/nanoGPT" and moved("", []) == "~"
    assert moved("/work", ["nanoGPT"]) == "/work/nanoGPT" and moved("repo", ["../other"]) == "other"
    assert moved("/work", [f"/scratch/{UNKNOWN}"]) == UNKNOWN == moved("/work", ["-"])
    assert moved(UNKNOWN, ["sub"]) == UNKNOWN and moved(UNKNOWN, ["/abs"]) == "/abs"
    assert within("", "cfg.yaml") == "cfg.yaml" and within("/work", "cfg.yaml") == "/work/cfg.yaml"
    assert within("/work", "~/cfg.yaml") == "~/cfg.yaml" and within(UNKNOWN, "cfg.yaml") is None


def test_a_command_after_cd_and_its_config_there_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cd REPO && python train.py config/x.py`` read as no command at all; a config relative to the folder
    ``cd`` goes to was looked for where the job was submitted. nanoGPT's shakespeare_char settings: 64 a
    step, 5,000 iterations."""
    repo = tmp_path / "nanoGPT"
    (repo / "config").mkdir(parents=True)
    (repo / "config" / "train_char.py").write_text(
        "gradient_accumulation_steps = 1\nbatch_size = 64\nmax_iters = 5000\nblock_size = 256\n"
    )
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "job.sh"
    for body in (
        "cd nanoGPT && python train.py config/train_char.py\n",
        f"cd {repo}\nsrun python train.py config/train_char.py\n",
        "cd $SLURM_SUBMIT_DIR/nanoGPT; python train.py config/train_char.py\n",
    ):
        script.write_text("#!/bin/bash\n#SBATCH --gres=gpu:1\n" + body, encoding="utf-8")
        parsed = parse_submission(script, [], {})
        assert parsed.description is not None, (body, parsed.undescribed)
        assert (parsed.description.global_batch, parsed.description.steps) == (64, 5000)
    body = "cd $(mktemp -d)\npython train.py config/train_char.py\n"
    script.write_text("#!/bin/bash\n#SBATCH --gres=gpu:1\n" + body, encoding="utf-8")
    unknown = parse_submission(script, [], {})
    assert unknown.description is None and "could not be read" in str(unknown.undescribed)


WRITTEN_CONFIG = """RUN=/scratch/$USER/lf-$SLURM_JOB_ID
mkdir -p $RUN && cd $HOME/LLaMA-Factory
cat > $RUN/train.yaml <<EOF
model_name_or_path: Qwen/Qwen2.5-0.5B
stage: sft
finetuning_type: lora
dataset: alpaca_en_demo
output_dir: $RUN/saves
per_device_train_batch_size: BATCH
gradient_accumulation_steps: 4
num_train_epochs: 2.0
EOF
llamafactory-cli train $RUN/train.yaml
"""


@pytest.mark.parametrize(
    ("batch", "expected"),
    [("2", {"global_batch": 2 * 4 * 4, "epochs": 2, "dataset_size": 999}), ("$BS", None), ("$(nproc)", None)],
)
def test_a_config_the_script_writes_from_a_here_document_is_read(
    tmp_path: Path, batch: str, expected: dict[str, object] | None
) -> None:
    """LLaMA-Factory's YAML written by ``cat > $RUN/train.yaml <<EOF`` to a folder the run names, then
    trained on: "its config names no model_name_or_path" (nothing was read). Its demo set's 999 rows, 2 a
    device x 4 accumulated x the 4 GPUs; a batch the shell fills in at run time is said, not guessed."""
    script = tmp_path / "job.sh"
    text = HEADER + WRITTEN_CONFIG.replace("BATCH", batch)
    parsed = parse_job(text.encode(), str(script), [str(script)], {})
    if expected is None:
        assert parsed.description is None and parsed.undescribed is not None
        assert "set only when it runs" in parsed.undescribed
        return
    assert parsed.description is not None, parsed.undescribed
    described = parsed.description.model_dump()
    assert {key: described[key] for key in expected} == expected
    assert described["model"] == "hf:Qwen/Qwen2.5-0.5B"
    assert parsed.files_read == ("/scratch/?/lf-?/train.yaml",)


def test_a_quoted_here_document_is_the_files_text_and_a_later_one_replaces_it(tmp_path: Path) -> None:
    """``<<'EOF'`` writes ``$N`` as it is (accelerate's YAML then holds no number: the request's GPUs);
    the last document written to a name is the one a command reads; ``>>`` appends to it."""
    launch = (
        "accelerate launch --config_file acc.yaml run_clm.py --model_name_or_path gpt2 "
        "--per_device_train_batch_size 8 --max_steps 10 --output_dir o\n"
    )
    quoted = "N=2\ncat > acc.yaml <<'EOF'\nnum_processes: $N\nEOF\n"
    written = quoted + "cat > acc.yaml <<EOF\nnum_processes: $N\nEOF\n"
    appended = written + "cat >> acc.yaml <<EOF\nmixed_precision: bf16\nEOF\n"
    described = _described(tmp_path, appended + launch)
    assert (described["global_batch"], described["own_amp"]) == (8 * 2, True)
    assert _described(tmp_path, written + launch)["own_amp"] is False
    assert _described(tmp_path, quoted + launch)["global_batch"] == 8 * 4


def test_the_file_a_here_document_goes_to() -> None:
    assert written_to(["cat", ">", "cfg.yaml", "<<EOF"]) == ("cfg.yaml", False)
    assert written_to(["cat", "<<EOF", ">cfg.yaml"]) == ("cfg.yaml", False)
    assert written_to(["cat", ">>cfg.yaml", "<<-EOF"]) == ("cfg.yaml", True)
    assert written_to(["tee", "-a", "cfg.yaml", "<<EOF"]) == ("cfg.yaml", True)
    assert written_to(["cat", ">", "cfg.yaml"]) is None, "no here-document: cat copies its input"
    assert written_to(["python", "x.py", "<<EOF"]) is None


def test_accelerates_default_config_the_script_writes_is_read(tmp_path: Path) -> None:
    """``accelerate config`` run in the job's own setup, as a here-document to its default place: the
    launch with no ``--config_file`` runs on its 2 processes, not the request's 4 GPUs (its file was looked
    for on disk alone)."""
    body = (
        "mkdir -p ~/.cache/huggingface/accelerate\n"
        "cat > ~/.cache/huggingface/accelerate/default_config.yaml <<EOF\nnum_processes: 2\nEOF\n"
        "accelerate launch run_clm.py --model_name_or_path gpt2 --per_device_train_batch_size 8 "
        "--max_steps 10 --output_dir o\n"
    )
    assert _described(tmp_path, body)["global_batch"] == 8 * 2
