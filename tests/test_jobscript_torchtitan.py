"""torchtitan's trainer read from its TOML config and flags (`advisor.jobscript.torchtitan`), as its own
run_train.sh starts it (``${CONFIG_FILE:-"./llama3_8b.toml"}``); and a file named only when the job runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.jobscript.commands import CommandReading
from advisor.jobscript.submission import (
    ParsedSubmission,
    named_files,
    parse_job,
    parse_submission,
    sent_files,
)

HEADER = "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gres=gpu:8\n#SBATCH --time=1-00:00:00\n"
LLAMA3_8B = """# torchtitan Config.toml
[job]
dump_folder = "./outputs"

[model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 1
seq_len = 8192
steps = 1000

[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = 1

[activation_checkpoint]
mode = "selective"  # ["none", "selective", "full"]
"""
RUN_TRAIN = """CONFIG_FILE=${CONFIG_FILE:-"./llama3_8b.toml"}
NGPU=${NGPU:-"8"}
torchrun --nproc_per_node=${NGPU} --rdzv_backend c10d --rdzv_endpoint="localhost:0" \\
    --local-ranks-filter 0 --role rank --tee 3 \\
    -m torchtitan.train --job.config_file ${CONFIG_FILE} "$@"
"""


def _parsed(
    folder: Path, body: str, monkeypatch: pytest.MonkeyPatch, config: str = LLAMA3_8B
) -> ParsedSubmission:
    (folder / "llama3_8b.toml").write_text(config, encoding="utf-8")
    script = folder / "job.sh"
    script.write_text(HEADER + body, encoding="utf-8")
    monkeypatch.chdir(folder)
    return parse_submission(script, [], {})


def test_llama3_8b_sharded_over_eight_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = _parsed(tmp_path, RUN_TRAIN, monkeypatch)
    assert parsed.description is not None, parsed.undescribed
    described = parsed.description.model_dump()
    expected = {
        "model": "hf:meta-llama-3-8b", "sequence_length": 8192, "global_batch": 8, "steps": 1000,
        "own_amp": True, "zero_stage": 3, "gradient_checkpointing": True,
    }  # fmt: skip
    assert {key: described[key] for key in expected} == expected
    assert parsed.files_read == ("./llama3_8b.toml",), "the default ${CONFIG_FILE:-...} names"


def test_the_command_line_wins_and_a_split_model_or_an_unknown_flavor_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = "torchrun --nproc_per_node=8 -m torchtitan.train --job.config_file ./llama3_8b.toml"
    flags = " --training.steps 50 --training.local_batch_size 2\n"
    stepped = _parsed(tmp_path, command + flags, monkeypatch).description
    assert stepped is not None and (stepped.steps, stepped.global_batch) == (50, 16)
    tensor = LLAMA3_8B.replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 2")
    split = _parsed(tmp_path, command + "\n", monkeypatch, tensor)
    said = "splits its model over GPUs (tensor, pipeline or context parallel: 2 x 1 x 1)"
    assert split.description is None and said in str(split.undescribed)
    debug = LLAMA3_8B.replace('flavor = "8B"', 'flavor = "debugmodel"')
    unknown = _parsed(tmp_path, command + "\n", monkeypatch, debug)
    assert unknown.description is None
    assert "llama3 debugmodel, a flavor the advisor does not build" in str(unknown.undescribed)


def test_a_file_named_only_when_the_job_runs_is_said_not_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--config $RECIPE`` with RECIPE set outside the script: the name was a NUL byte, which open() refused
    with a ValueError, and `advisor parse` failed with a traceback."""
    body = "accelerate launch run_clm.py --config $RECIPE --model_name_or_path gpt2 --max_steps 9\n"
    parsed = _parsed(tmp_path, body, monkeypatch)
    assert parsed.files_unread == ("? (named only when the job runs)",)
    assert parsed.description is not None and parsed.description.steps == 9


@pytest.mark.parametrize(
    ("launch", "gpus"),
    [
        ("CONFIG_FILE=$SLURM_SUBMIT_DIR/llama3_8b.toml ./run_train.sh --training.steps 50", 8),
        (
            "NGPU=4 CONFIG_FILE=$SLURM_SUBMIT_DIR/llama3_8b.toml bash run_train.sh --training.steps=50",
            4,
        ),
    ],
)
def test_its_run_train_sh_is_its_trainer_on_ngpu_with_the_config_file_the_command_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launch: str, gpus: int
) -> None:
    """torchtitan's README starts it as ``CONFIG_FILE=... ./run_train.sh``: a .sh program, named as not read.
    Its config is named from the submission folder after ``cd`` into the repository (it was looked for
    in the repository: ``$SLURM_SUBMIT_DIR`` read as ``.``)."""
    parsed = _parsed(tmp_path, f"cd $HOME/src/torchtitan\n{launch}\n", monkeypatch)
    assert parsed.description is not None, parsed.undescribed
    described = parsed.description
    assert (described.model, described.global_batch, described.steps) == ("hf:meta-llama-3-8b", gpus, 50)
    assert parsed.files_read == ("$SLURM_SUBMIT_DIR/llama3_8b.toml",)
    # The daemon reads no file: it is sent those advise-submit read, by the names it finds them again by.
    data = (tmp_path / "job.sh").read_bytes()
    files = named_files(data, "job.sh", ["job.sh"], {}, [])
    served = parse_job(data, "job.sh", ["job.sh"], {}, reading=CommandReading({}, sent_files(files)))
    assert served.description == described


def test_its_run_train_sh_without_a_config_file_trains_its_debug_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = _parsed(tmp_path, "./run_train.sh\n", monkeypatch)
    assert parsed.description is None and parsed.undescribed is not None
    assert (
        "torchtitan.train's config ./torchtitan/models/llama3/train_configs/debug_model.toml could not"
        in (parsed.undescribed)
    )
