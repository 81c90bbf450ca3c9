"""nanoGPT's train.py read as its own globals, its Python config (read as text, never run) and its
``--key=value`` flags (`advisor.jobscript.nanogpt`). It said "takes flags the advisor does not read"."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.jobscript.nanogpt import config_assignments
from advisor.jobscript.submission import ParsedSubmission, parse_job, parse_submission

HEADER = "#!/bin/bash\n#SBATCH --gres=gpu:{gpus}\n#SBATCH --time=5-00:00:00\n"
CONFIGS = Path(__file__).resolve().parents[1] / "benchmarks" / "jobs" / "nanoGPT" / "config"
"""nanoGPT's own configs (benchmarks/jobs: the scripts `benchmarks/job_reading.py` reads)."""
TRAIN_GPT2 = (CONFIGS / "train_gpt2.py").read_text(encoding="utf-8")
SHAKESPEARE = (
    "import os  # not read: only literal assignments are\n"
    + (CONFIGS / "train_shakespeare_char.py").read_text(encoding="utf-8")
    + 'device = os.environ.get("DEVICE", "cuda")\n'
)


def _parsed(folder: Path, command: str, gpus: int, monkeypatch: pytest.MonkeyPatch) -> ParsedSubmission:
    (folder / "config").mkdir(exist_ok=True)
    (folder / "config" / "train_gpt2.py").write_text(TRAIN_GPT2, encoding="utf-8")
    (folder / "config" / "train_shakespeare_char.py").write_text(SHAKESPEARE, encoding="utf-8")
    script = folder / "job.sh"
    script.write_text(HEADER.format(gpus=gpus) + command + "\n", encoding="utf-8")
    monkeypatch.chdir(folder)
    return parse_submission(script, [], {})


def test_gpt2_124m_on_eight_gpus_accumulates_its_forty_micro_batches_five_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = _parsed(
        tmp_path, "torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2.py", 8, monkeypatch
    )
    assert parsed.description is not None, parsed.undescribed
    described = parsed.description.model_dump()
    shape = {"n_positions": 1024, "n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50304}
    expected = {"model": "hf:gpt2", "model_kwargs": shape, "sequence_length": 1024, "global_batch": 480}
    assert {key: described[key] for key in expected} == expected, "12 x 1,024 tokens x 40 = 491,520 a step"
    assert (described["steps"], described["own_accumulation"], described["own_amp"]) == (600000, 5, True)
    assert parsed.files_read == ("config/train_gpt2.py",)


def test_a_character_model_takes_its_datasets_vocabulary_and_the_command_line_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = (
        "python train.py config/train_shakespeare_char.py --batch_size=32 --compile=False --dtype=float32"
    )
    parsed = _parsed(tmp_path, command, 1, monkeypatch)
    assert parsed.description is not None, parsed.undescribed
    described = parsed.description.model_dump()
    shape = {"n_positions": 256, "n_layer": 6, "n_head": 6, "n_embd": 384, "vocab_size": 65}
    assert described["model_kwargs"] == shape and described["global_batch"] == 32
    assert (described["steps"], described["own_amp"]) == (5000, False)


def test_fine_tuning_gpt2_xl_is_that_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    command = (
        "python train.py --init_from=gpt2-xl --batch_size=1 --gradient_accumulation_steps=32 --max_iters=20"
    )
    described = _parsed(tmp_path, command, 1, monkeypatch).description
    assert described is not None
    assert (described.model, described.model_kwargs, described.global_batch) == (
        "hf:gpt2-xl",
        {"n_positions": 1024},
        32,
    )


def test_the_daemon_reads_no_config_and_says_so(tmp_path: Path) -> None:
    text = HEADER.format(gpus=8) + "torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2.py\n"
    parsed = parse_job(text.encode(), "job.sh", ["job.sh"], {})
    assert parsed.description is None and parsed.undescribed == (
        "job.sh:4: nanoGPT's config config/train_gpt2.py could not be read here: its settings size the job"
    )


def test_mmdetections_train_py_and_its_python_config_are_not_nanogpt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "retinanet.py").write_text("max_epochs = 12\nmodel = dict(type='RetinaNet')\n")
    parsed = _parsed(tmp_path, "python tools/train.py configs/retinanet.py", 1, monkeypatch)
    assert parsed.description is None and "takes flags the advisor does not read" in str(parsed.undescribed)


def test_a_config_is_read_as_literal_assignments_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = (
        f"import os\nos.system('touch {marker}')\nx = 5 * 8\ny = 'a'\nz = 1 // 0\nw = open('f')\nv = [1, 2]\n"
    )
    assert config_assignments(text) == {"x": 40, "y": "a", "v": [1, 2]}
    assert not marker.exists()
    with pytest.raises(ValueError, match="line 1: not Python"):
        config_assignments("x = (")


def test_a_hugging_face_train_py_with_a_block_size_is_not_nanogpt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = "python train.py --model_name_or_path gpt2 --block_size 512 --max_steps 9"
    parsed = _parsed(tmp_path, command, 1, monkeypatch)
    assert parsed.description is not None and parsed.inferred_from is not None
    assert " (hf): " in parsed.inferred_from and parsed.description.sequence_length == 512
