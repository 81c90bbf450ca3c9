"""The jobs GPU clusters run, read as they are written: HF run_clm.py and run_glue.py, a TRL recipe under
accelerate with DeepSpeed, timm's train.py, the Lightning CLI; without a single `#ADVISOR` line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from advisor.jobscript.recipes import recipe_flags
from advisor.jobscript.submission import ParsedSubmission, parse_submission, read_named_file

HEADER = "#!/bin/bash\n#SBATCH --gres=gpu:{gpus}\n#SBATCH --time=1-00:00:00\n"
JOBS = {
    "clm": (1, "python run_clm.py --model_name_or_path gpt2 --dataset_name wikitext \\\n"
            "  --dataset_config_name wikitext-2-raw-v1 --per_device_train_batch_size 8 --block_size 1024 \\\n"
            "  --num_train_epochs 3 --bf16 --do_train --output_dir /home/nicolas/out\n"),
    "glue": (1, "export TASK_NAME=mrpc\n"
             "python run_glue.py --model_name_or_path google-bert/bert-base-cased \\\n"
             "  --task_name $TASK_NAME --do_train --max_seq_length 128 --per_device_train_batch_size 32 \\\n"
             "  --num_train_epochs 3 --output_dir /tmp/$TASK_NAME/\n"),
    "sft": (2, "accelerate launch --config_file accelerate.yaml sft.py --config recipe.yaml\n"),
    "resnet50d": (1, "python train.py /data/imagenet --model resnet50d -b 128 --img-size 224 --amp \\\n"
                  "  --epochs 100\n"),
    "vit": (1, "python train.py /data/imagenet --model vit_small_patch16_224 -b 256 --img-size 224 --amp \\\n"
            "  --epochs 300\n"),
    "lightning": (1, "python main.py fit --config lightning.yaml --trainer.max_steps 2000 \\\n"
                  "  --trainer.precision bf16-mixed\n"),
    "mlm": (2, "accelerate launch --multi_gpu --mixed_precision bf16 --num_processes 2 \\\n"
            "  run_mlm_no_trainer.py --model_name_or_path roberta-base --dataset_name wikitext \\\n"
            "  --dataset_config_name wikitext-2-raw-v1 --per_device_train_batch_size 16 \\\n"
            "  --max_seq_length 512 --max_train_steps 10000\n"),
    "lightning_args": (4, "srun python train.py fit --model.init_args.model_name_or_path=gpt2 \\\n"
                       "  --data.init_args.batch_size=8 --trainer.accumulate_grad_batches=2 \\\n"
                       "  --trainer.max_steps=500 --trainer.devices=4 --trainer.precision=16-mixed\n"),
    "lightning_bert": (1, "python train.py fit --model.model_name_or_path=bert-base-uncased \\\n"
                       "  --data.batch_size=32 --trainer.max_steps=1000\n"),
    "trainer_vit": (1, "python finetune.py --model_name_or_path google/vit-base-patch16-224 \\\n"
                    "  --per_device_train_batch_size 64 --max_steps 500\n"),
    "scratch": (4, "torchrun --nproc_per_node 4 run_clm.py --model_type gpt2 \\\n"
                "  --tokenizer_name openai-community/gpt2 --per_device_train_batch_size 4 \\\n"
                "--config_overrides=\"n_embd=1024,n_head=16,n_layer=48,n_positions=1024,resid_pdrop=.2\" \\\n"
                "  --dataset_name wikitext --dataset_config_name wikitext-2-raw-v1 \\\n"
                "  --do_train --output_dir /tmp/test-clm --bf16\n"),
    "scratch_named": (1, "python run_clm.py --config_name gpt2-medium --tokenizer_name gpt2 \\\n"
                      "  --max_steps 100 --per_device_train_batch_size 4 --output_dir out\n"),
}  # fmt: skip
RECIPE = """model_name_or_path: meta-llama/Llama-3.2-1B
attn_implementation: sdpa
dataset_name: trl-lib/Capybara
num_train_epochs: 1
per_device_train_batch_size: 4
gradient_accumulation_steps: 8
gradient_checkpointing: true
max_length: 2048
bf16: true
use_peft: true
lora_r: 32
lora_target_modules: all-linear
"""
ACCELERATE = """distributed_type: DEEPSPEED
deepspeed_config:
  zero_stage: 2
mixed_precision: bf16
num_machines: 1
num_processes: 2
"""
LIGHTNING = """model:
  class_path: lm.Module
  init_args:
    model_name_or_path: gpt2
data:
  batch_size: 16
  max_length: 512
"""


def write_jobs(folder: Path) -> dict[str, Path]:
    """The jobs and the files they name, in ``folder`` (their working directory)."""
    for name, text in (
        ("recipe.yaml", RECIPE),
        ("accelerate.yaml", ACCELERATE),
        ("lightning.yaml", LIGHTNING),
    ):
        (folder / name).write_text(text, encoding="utf-8")
    scripts = {}
    for name, (gpus, command) in JOBS.items():
        scripts[name] = folder / f"{name}.sh"
        scripts[name].write_text(HEADER.format(gpus=gpus) + command, encoding="utf-8")
    return scripts


def parsed_in(folder: Path, script: Path, monkeypatch: pytest.MonkeyPatch) -> ParsedSubmission:
    monkeypatch.chdir(folder)
    return parse_submission(script, [], {})


EXPECTED: dict[str, dict[str, Any]] = {
    # 2,373,632 tokens of wikitext-2 in blocks of 1,024: 2,318 sequences per epoch
    "clm": {"model": "hf:gpt2", "task": "causal-lm", "sequence_length": 1024, "global_batch": 8,
            "epochs": 3, "dataset_size": 2318, "own_amp": True},
    "glue": {"model": "hf:google-bert/bert-base-cased", "task": "sequence-classification",
             "sequence_length": 128, "global_batch": 32, "dataset_size": 3668,
             "model_kwargs": {"num_labels": 2}},
    # 4 per device x 8 accumulated x accelerate's 2 processes; ZeRO-2 and bf16 from accelerate's file
    "sft": {"model": "hf:meta-llama/Llama-3.2-1B", "task": "causal-lm", "sequence_length": 2048,
            "global_batch": 64, "own_accumulation": 8, "own_amp": True, "gradient_checkpointing": True,
            "lora_rank": 32, "lora_targets": ("all-linear",), "zero_stage": 2, "dataset_size": 15806,
            "optimizer": "adamw",
            "model_kwargs": {"attn_implementation": "sdpa"}},
    "resnet50d": {"model": "timm:resnet50d", "input_shape": (3, 224, 224), "global_batch": 128,
                  "dataset_size": 1281167, "own_amp": True, "model_kwargs": {"num_classes": 1000},
                  "optimizer": "sgd"},
    "vit": {"model": "timm:vit_small_patch16_224", "input_shape": (3, 224, 224), "global_batch": 256,
            "epochs": 300},
    "lightning": {"model": "hf:gpt2", "sequence_length": 512, "global_batch": 16, "steps": 2000,
                  "own_amp": True},
    # accelerate's own --mixed_precision; the no_trainer scripts' --max_train_steps
    "mlm": {"model": "hf:roberta-base", "task": "masked-lm", "sequence_length": 512, "global_batch": 32,
            "steps": 10000, "own_amp": True},
    # jsonargparse's --model.init_args.NAME is --model.NAME: 8 x 2 accumulated x 4 devices
    "lightning_args": {"model": "hf:gpt2", "global_batch": 64, "steps": 500, "own_amp": True,
                       "own_accumulation": 2},
    # No program's task and no length: what the model is trained for (BERT's 512 tokens, not a causal
    # LM's 1024, which its position table cannot hold; a ViT reads images, not tokens)
    "lightning_bert": {"model": "hf:bert-base-uncased", "task": "masked-lm", "sequence_length": 512,
                       "global_batch": 32, "steps": 1000},
    "trainer_vit": {"model": "hf:google/vit-base-patch16-224", "task": "image-classification",
                    "sequence_length": None, "global_batch": 64, "steps": 500},
    # Trained from scratch (run_clm's README): GPT2Config's defaults with the overrides, as transformers
    # types them; or a configuration named
    "scratch": {"model": "hf:gpt2", "task": "causal-lm", "sequence_length": 1024, "global_batch": 16,
                "model_kwargs": {"n_embd": 1024, "n_head": 16, "n_layer": 48, "n_positions": 1024,
                                 "resid_pdrop": 0.2}},
    "scratch_named": {"model": "hf:gpt2-medium", "task": "causal-lm", "steps": 100, "model_kwargs": {}},
}  # fmt: skip


@pytest.mark.parametrize("job", list(JOBS))
def test_each_job_is_described_from_its_command_and_the_files_it_names(
    job: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = parsed_in(tmp_path, write_jobs(tmp_path)[job], monkeypatch)
    assert parsed.description is not None, parsed.inferred_from
    described = parsed.description.model_dump()
    assert {key: described[key] for key in EXPECTED[job]} == EXPECTED[job]
    assert not described["follows_advice"] and parsed.inferred_from is not None
    files = {"sft": ("recipe.yaml", "accelerate.yaml"), "lightning": ("lightning.yaml",)}.get(job, ())
    assert parsed.files_read == files and parsed.files_unread == ()


def test_a_file_that_cannot_be_read_is_named_and_the_command_line_alone_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = write_jobs(tmp_path)
    (tmp_path / "recipe.yaml").unlink()
    assert parsed_in(tmp_path, scripts["sft"], monkeypatch).description is None, "nothing is guessed"
    launcher = {"config-file": "accelerate.yaml"}
    recipe = recipe_flags({"config": "recipe.yaml"}, [], launcher, read_named_file)
    assert recipe.unread == ["recipe.yaml"] and recipe.read == ["accelerate.yaml"]
    assert recipe.values["accelerate.deepspeed-config.zero-stage"] == "2"
    (tmp_path / "recipe.yaml").write_text("model_name_or_path: [unclosed\n", encoding="utf-8")
    recipe = recipe_flags({"config": "recipe.yaml"}, [], {}, read_named_file)
    assert recipe.unread[0].startswith("recipe.yaml (line ") and recipe.values == {}


def test_the_command_line_wins_over_its_recipe_and_a_run_time_batch_is_not_guessed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = write_jobs(tmp_path)
    text = scripts["sft"].read_text().replace("recipe.yaml", "recipe.yaml --max_length 512 --max_steps 100")
    scripts["sft"].write_text(text, encoding="utf-8")
    parsed = parsed_in(tmp_path, scripts["sft"], monkeypatch)
    assert parsed.description is not None
    assert (parsed.description.sequence_length, parsed.description.steps) == (512, 100)
    scripts["clm"].write_text(scripts["clm"].read_text().replace("batch_size 8", "batch_size $(nproc)"))
    assert parsed_in(tmp_path, scripts["clm"], monkeypatch).description is None


def test_a_model_type_with_no_known_defaults_says_what_to_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--model_type llama`` without a configuration: which LlamaConfig the job builds the advisor does not
    ship, so it says so and how to name one; it said nothing."""
    script = tmp_path / "new.sh"
    command = "python run_clm.py --model_type llama --per_device_train_batch_size 4 --max_steps 9\n"
    script.write_text(HEADER.format(gpus=1) + command, encoding="utf-8")
    parsed = parsed_in(tmp_path, script, monkeypatch)
    assert parsed.description is None and parsed.undescribed == (
        f"{script}:4: run_clm.py trains a new llama model from its configuration class's defaults, which the "
        "advisor does not know: name the configuration (--config_name NAME) or add #ADVISOR --model hf:NAME"
    )


@pytest.mark.parametrize(
    ("command", "program", "why"),
    [
        ("trl dpo --config recipe.yaml\n", "trl dpo", "trains on preference pairs"),
        ("accelerate launch trl/scripts/dpo.py --config recipe.yaml\n", "dpo.py", "preference"),
        ("accelerate launch grpo.py --config recipe.yaml\n", "grpo.py", "generates completions at each step"),
        ("python reward_modeling.py --config recipe.yaml\n", "reward_modeling.py", "preference"),
    ],
)
def test_preference_and_online_rl_trainers_are_refused_with_why(
    command: str, program: str, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SFT recipe's model and batch under TRL's DPO, GRPO and reward trainers: their step is two
    sequences a sample (and a reference model's forward), or generation; read as one sequence a sample,
    a DPO job was predicted at about 3/8 of its work (before: described as the SFT job)."""
    write_jobs(tmp_path)
    script = tmp_path / "pairs.sh"
    script.write_text(HEADER.format(gpus=2) + command, encoding="utf-8")
    parsed = parsed_in(tmp_path, script, monkeypatch)
    assert parsed.description is None and parsed.undescribed is not None
    assert parsed.undescribed.startswith(f"{script}:4: {program} ") and why in parsed.undescribed
    assert parsed.undescribed.endswith(
        "which the advisor does not predict: it predicts training on one sequence a sample"
    )


@pytest.mark.parametrize(
    ("program", "why"),
    [
        ("run_speech_recognition_ctc.py", "trains on audio"),
        ("run_audio_classification.py", "trains on audio"),
        ("run_semantic_segmentation.py", "trains a detection or segmentation model"),
        ("run_object_detection.py", "trains a detection or segmentation model"),
        ("run_mae.py", "pretrains on images (masked patches, or images paired with text)"),
    ],
)
def test_hugging_faces_examples_of_other_inputs_are_refused_with_why(
    program: str, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wav2vec2 fine-tuned for speech recognition on LibriSpeech was read as 1,024 tokens a sample (asked
    only for the dataset's size): a second of its audio is 16,000 samples. Refused, and said why."""
    script = tmp_path / "other.sh"
    command = f"torchrun --nproc_per_node=2 {program} --model_name_or_path facebook/wav2vec2-base "
    command += "--dataset_name openslr/librispeech_asr --per_device_train_batch_size 16 --max_steps 100\n"
    script.write_text(HEADER.format(gpus=2) + command, encoding="utf-8")
    parsed = parsed_in(tmp_path, script, monkeypatch)
    assert parsed.description is None and parsed.undescribed is not None
    assert parsed.undescribed.startswith(f"{script}:4: {program} {why}, which the advisor does not predict")
    assert parsed.undescribed.endswith(
        "it predicts language models over token sequences and image classification"
    )


def test_accelerates_default_config_is_read_where_no_config_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``accelerate launch`` with no ``--config_file`` runs as ``accelerate config`` left its default file:
    bf16 on 4 processes here, 8 a device: 32 a step in mixed precision (before: the job's 8 GPUs in fp32).
    Without that file nothing changes and nothing is said; a named file wins over it."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    script = tmp_path / "acc.sh"
    command = "accelerate launch run_clm.py --model_name_or_path gpt2 --per_device_train_batch_size 8 "
    command += "--max_steps 9\n"
    script.write_text(HEADER.format(gpus=8) + command, encoding="utf-8")
    alone = parsed_in(tmp_path, script, monkeypatch)
    assert alone.description is not None and alone.files_unread == ()
    assert (alone.description.global_batch, alone.description.own_amp) == (64, False)
    default = home / ".cache" / "huggingface" / "accelerate" / "default_config.yaml"
    default.parent.mkdir(parents=True)
    default.write_text(
        "distributed_type: MULTI_GPU\nmixed_precision: bf16\nnum_processes: 4\n", encoding="utf-8"
    )
    configured = parsed_in(tmp_path, script, monkeypatch)
    assert configured.description is not None
    assert (configured.description.global_batch, configured.description.own_amp) == (32, True)
    assert configured.files_read == ("~/.cache/huggingface/accelerate/default_config.yaml",)
    (tmp_path / "two.yaml").write_text("num_processes: 2\n", encoding="utf-8")
    script.write_text(HEADER.format(gpus=8) + command.replace("launch", "launch --config_file two.yaml"))
    named = parsed_in(tmp_path, script, monkeypatch).description
    assert named is not None and (named.global_batch, named.own_amp) == (16, False)


def test_accelerates_default_config_is_looked_for_under_the_jobs_hf_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """accelerate finds its default config under ``$HF_HOME`` (else ``$XDG_CACHE_HOME/huggingface``), as the
    Hub's cache; a job that exports its own read the one in ~/.cache (bf16 on 4 processes, where the job's
    own home has none: 8 GPUs in fp32). One only the run names is said, not read."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    cached = home / ".cache" / "huggingface" / "accelerate" / "default_config.yaml"
    cached.parent.mkdir(parents=True)
    cached.write_text("mixed_precision: bf16\nnum_processes: 4\n", encoding="utf-8")
    script = tmp_path / "acc.sh"
    command = "accelerate launch run_clm.py --model_name_or_path gpt2 --per_device_train_batch_size 8 "
    command += "--max_steps 9\n"
    for hf_home, read, batch in [
        ("$HOME/hf", (), 64),
        ("/scratch/$USER/hf", (), 64),
    ]:
        script.write_text(f"{HEADER.format(gpus=8)}export HF_HOME={hf_home}\n{command}", encoding="utf-8")
        parsed = parsed_in(tmp_path, script, monkeypatch)
        assert parsed.description is not None
        assert (parsed.description.global_batch, parsed.files_read) == (batch, read)
    assert parsed.files_unread == (
        "/scratch/?/hf/accelerate/default_config.yaml (named only when the job runs)",
    )
    own = home / "hf" / "accelerate" / "default_config.yaml"
    own.parent.mkdir(parents=True)
    own.write_text("num_processes: 2\n", encoding="utf-8")
    script.write_text(
        f"{HEADER.format(gpus=8)}export XDG_CACHE_HOME=~/nothing\nexport HF_HOME=~/hf\n{command}"
    )
    parsed = parsed_in(tmp_path, script, monkeypatch)
    assert parsed.description is not None and parsed.description.global_batch == 16
    assert parsed.files_read == ("~/hf/accelerate/default_config.yaml",)


@pytest.mark.parametrize(("nodes", "batch"), [("2", 8 * 4 * 2), ("1-2", None)])
def test_a_node_count_slurm_sets_is_read_as_the_request_fixes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: str, batch: int | None
) -> None:
    """``--trainer.num_nodes=$SLURM_JOB_NUM_NODES`` under ``--nodes=2`` is two nodes (it was the recipe's one,
    half the batch); under a range the run decides it, which is said, not guessed."""
    (tmp_path / "lit.yaml").write_text("trainer:\n  num_nodes: 1\n  devices: 4\ndata:\n  batch_size: 8\n")
    script = tmp_path / "lit.sh"
    command = (
        "srun python main.py fit --config lit.yaml --trainer.num_nodes=$SLURM_JOB_NUM_NODES "
        "--model.model_name_or_path=gpt2 --trainer.max_steps=100\n"
    )
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes={nodes} --ntasks-per-node=4 --gres=gpu:4\n{command}")
    parsed = parsed_in(tmp_path, script, monkeypatch)
    if batch is not None:
        assert parsed.description is not None and parsed.description.global_batch == batch
    else:
        assert parsed.description is None and parsed.undescribed is not None
        assert "set only when it runs (the ? in: srun python main.py fit" in parsed.undescribed
