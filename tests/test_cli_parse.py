"""`advisor parse` through the console script: JSON for tools, a clear error for bad scripts."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

from advisor.cli import COMMAND_MODULES, SUMMARIES
from advisor.settings import load_settings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ADVISOR = str(Path(sys.executable).parent / "advisor")


def advisor_parse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ADVISOR, "parse", *args], capture_output=True, text=True, timeout=60, check=False)


def test_json_output_carries_the_request_and_the_description() -> None:
    result = advisor_parse(str(EXAMPLES / "train-flag.sbatch"), "--global-batch=256", "-p", "a100", "--json")
    assert result.returncode == 0, result.stderr
    parsed = json.loads(result.stdout)
    assert parsed["request"]["partitions"] == ["a100"]
    assert parsed["request"]["gpus"] == {"count": 1, "type": None, "per": "node", "option": "gres"}
    assert parsed["request"]["time_limit"] == "PT2H"
    assert parsed["description"]["global_batch"] == 256
    assert parsed["description"]["batch_flag"] == "--batch-size"


def test_a_script_sbatch_would_refuse_is_refused_with_its_reason(tmp_path: Path) -> None:
    script = tmp_path / "dos.sh"
    script.write_bytes(b"#!/bin/sh\r\n#SBATCH -p t4\r\ntrue\r\n")
    result = advisor_parse(str(script))
    assert result.returncode == 1
    assert result.stderr.startswith(f"advisor: error: {script}: ")
    assert "DOS line breaks" in result.stderr


def test_the_command_lines_start_without_torch_or_xgboost() -> None:
    probe = (
        "import sys, advisor.cli, advisor.submit; "
        "print(sorted({'torch', 'torchvision', 'xgboost'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


def test_advise_submit_reaches_sbatch_on_the_standard_library_alone(tmp_path: Path) -> None:
    """Its start-up is every job's overhead: pydantic, rich, torch and xgboost stay unloaded (no daemon here,
    so the job goes to sbatch unchanged; a real daemon's answer is read as plain JSON too)."""
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/sh\n#SBATCH -p t4\n#ADVISOR --model=resnet18 --global-batch=64 --steps=10\ntrue\n"
    )
    probe = (
        "import sys, advisor.submit; advisor.submit.main(['--dry-run', sys.argv[1]]); "
        "print('loaded:', sorted({'pydantic', 'rich', 'torch', 'xgboost'} & set(sys.modules)))"
    )
    env = {**os.environ, "ADVISOR_SOCKET": str(tmp_path / "absent.sock")}
    result = subprocess.run(
        [sys.executable, "-c", probe, str(script)], capture_output=True, text=True, timeout=60, env=env
    )
    assert "a dry run submits nothing" in result.stderr
    assert result.stdout.splitlines()[-1] == "loaded: []"


def test_each_command_module_adds_the_commands_a_base_install_lists_for_it() -> None:
    """A base install lists a module's commands from `COMMAND_MODULES` when the module cannot load."""
    for module_name, names in COMMAND_MODULES:
        commands = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module_name).add_commands(commands, load_settings({}, None))
        assert tuple(commands.choices) == names, module_name
        helps = {action.dest: action.help for action in commands._choices_actions}
        assert helps == {name: SUMMARIES[name] for name in names}, "advisor --help lists them so"


def test_help_starts_without_any_command_module() -> None:
    """`advisor --help` lists every command from `SUMMARIES`: no command module, neither tool (the sandbox,
    compression), no torch, xgboost or numpy, and not the settings (pydantic) loaded (before: the sandbox,
    numpy and sqlite_utils, half a second on this machine; then the settings, 0.4 s of 0.5)."""
    heavy = ("advisor.sandbox", "advisor.compress", "torch", "xgboost", "numpy", "sqlite_utils", "pydantic")
    heavy += ("advisor.settings",)
    heavy += tuple(module for module, _ in COMMAND_MODULES)
    probe = (
        "import sys; from advisor.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"heavy = {heavy!r}\n"
        "print('loaded:', sorted(name for name in heavy if name in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.splitlines()[-1] == "loaded: []"
    assert all(f"    {name}" in result.stdout for name in SUMMARIES)


def test_parse_takes_json_before_the_script_and_shows_values_as_written() -> None:
    """``advisor parse --json job.sh`` as the README has it (before: argparse refused it), and the table
    shows no Python repr (``['t4']``, ``(3, 32, 32)``, ``True``, ``{'num_classes': 10}`` before)."""
    result = advisor_parse("--json", str(EXAMPLES / "demo.sbatch"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["description"]["input_shape"] == [3, 32, 32]
    shown = advisor_parse(str(EXAMPLES / "demo.sbatch")).stdout
    assert "3x32x32" in shown and "num_classes=10" in shown and "1 GPU per node (--gres)" in shown
    for raw in ("[", "(3,", "True", "False", "None", "{", "time_limit"):
        assert raw not in shown, raw


def test_parse_shows_a_token_model_no_image_shape_and_no_empty_rows(tmp_path: Path) -> None:
    """An accelerate job of a causal LM: its sequence is its input (the 3x224x224 default is not read) and
    a field it leaves empty (LoRA targets) is not a row."""
    script = tmp_path / "sft.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH -p a100 --gres=gpu:4 -t 1-00:00:00\n"
        "accelerate launch --num_processes 4 run_clm.py --model_name_or_path gpt2 --dataset_name wikitext"
        " --dataset_config_name wikitext-2-raw-v1 --per_device_train_batch_size 8 --block_size 512"
        " --num_train_epochs 1\n",
        encoding="utf-8",
    )
    result = advisor_parse(str(script))
    assert result.returncode == 0, result.stderr
    assert "hf:gpt2" in result.stdout and "512" in result.stdout
    assert "input shape" not in result.stdout and "3x224x224" not in result.stdout  # not the tmp path's 224
    assert "lora targets" not in result.stdout
    described = json.loads(advisor_parse("--json", str(script)).stdout)["description"]
    assert described["sequence_length"] == 512 and described["lora_targets"] == []


def test_the_commands_that_print_data_take_json() -> None:
    """``--json`` where a command prints data (before: sandbox status/up, models train, history train,
    profile, bench plan/run/submit/ingest, comm measure/ingest/show, and recommend before its script
    refused it)."""
    from advisor.cli import _parser

    settings = load_settings({}, None)
    for words in (
        ["sandbox", "status", "--json"],
        ["sandbox", "up", "--json"],
        ["models", "train", "--json"],
        ["models", "list", "--json"],
        ["models", "evaluate", "--json"],
        ["recommend", "--json", "job.sh"],
        ["parse", "--json", "job.sh"],
        ["status", "--json"],
        ["explain", "7", "--json"],
        ["report", "--json"],
        ["policy", "check", "policy.toml", "--json"],
        ["history", "train", "--json"],
        ["history", "evaluate", "--json"],
        ["profile", "resnet18", "--batch-size=8", "--partition=t4", "--json"],
        ["inspect", "resnet18", "--json"],
        ["bench", "plan", "--json"],
        ["bench", "run", "--quick", "--json"],
        ["bench", "submit", "--json"],
        ["bench", "ingest", "results.jsonl", "--json"],
        ["comm", "measure", "--json"],
        ["comm", "ingest", "results.jsonl", "--json"],
        ["comm", "show", "--json"],
    ):
        assert _parser(settings, words[0]).parse_args(words).json is True, words


def test_predict_takes_a_token_model_s_sequence_task_and_constructor_keywords() -> None:
    """As `#ADVISOR` does (issue 52): --sequence-length, --task, --model-arg KEY=VALUE (JSON numbers and
    booleans as such, other values as text); a malformed one is refused by name."""
    from advisor.argtypes import model_arg
    from advisor.cli import _parser

    assert model_arg("n_layer=2") == ("n_layer", 2)
    assert model_arg("dropout=0.1") == ("dropout", 0.1) and model_arg("bias=true") == ("bias", True)
    assert model_arg("activation=gelu_new") == ("activation", "gelu_new")
    words = ["predict", "--model=hf:gpt2", "--batch-size=4", "--partition=t4", "--sequence-length=128"]
    words += ["--task=causal-lm", "--model-arg", "n_layer=2", "--model-arg=n_head=4"]
    args = _parser(load_settings({}, None), "predict").parse_args([*words, "--optimizer=adamw"])
    assert (args.sequence_length, args.task, args.optimizer) == (128, "causal-lm", "adamw")
    assert dict(args.model_arg) == {"n_layer": 2, "n_head": 4}
    refused = subprocess.run(
        [ADVISOR, *words[:4], "--model-arg=2layers"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2 and "expected KEY=VALUE such as dropout=0.1" in refused.stderr
