"""advisor.runtime: the advice changes how a step is computed, never what the optimizer sees."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from advisor import contract
from advisor.jobscript.rewrite import Advice, apply_advice
from advisor.jobscript.submission import parse_job
from advisor.runtime import (
    AccumulatingStep,
    Amp,
    AutocastPlan,
    ContractError,
    RuntimeSettings,
    autocast_plan,
    loader_options,
    micro_batches,
    prepare_model,
    read_settings,
    to_device,
)
from advisor.runtime.step import Batch

torch.set_num_threads(1)
CPU = torch.device("cpu")
PARTITIONS = {"a100", "v100", "t4", "cpu"}


def small_cnn(dtype: torch.dtype) -> nn.Module:
    """No batch norm: its statistics depend on the batch split, so only then are the two equivalent."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(32, 5)
    )
    return model.to(dtype)


def data(samples: int, dtype: torch.dtype, seed: int) -> Batch:
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(samples, 3, 8, 8, generator=generator, dtype=dtype)
    return images, torch.randint(0, 5, (samples,), generator=generator)


def optimizer_for(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=1e-3)


def parameters(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in model.named_parameters()}


def train(
    model: nn.Module, settings: RuntimeSettings, batches: list[Batch], wrap: Callable[[nn.Module], nn.Module]
) -> dict[str, torch.Tensor]:
    """Optimizer steps with the helper over `batches`, each split into `settings.micro_batch` pieces."""
    optimizer = optimizer_for(model)
    trained = wrap(prepare_model(model, settings, CPU))
    stepper = AccumulatingStep(trained, optimizer, settings, CPU)
    for images, labels in batches:
        size = settings.micro_batch
        pieces = list(zip(images.split(size), labels.split(size), strict=True))
        for group in micro_batches(pieces, settings.grad_accum):
            stepper.step(group, lambda x, y: nn.functional.cross_entropy(trained(x), y))
    return parameters(model)


def reference(model: nn.Module, batches: list[Batch], amp: bool) -> dict[str, torch.Tensor]:
    """The textbook loop, one whole batch per optimizer step."""
    optimizer = optimizer_for(model)
    for images, labels in batches:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = nn.functional.cross_entropy(model(images), labels)
        torch.autograd.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    return parameters(model)


def same_training(
    dtype: torch.dtype, amp: Amp, wrap: Callable[[nn.Module], nn.Module] = lambda m: m
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Initial parameters, then after two steps of 4 micro-batches of 8, and of the reference on 32."""
    model = small_cnn(dtype)
    batches = [data(32, dtype, seed) for seed in (1, 2)]
    accumulated = train(copy.deepcopy(model), RuntimeSettings(8, 4, amp), batches, wrap)
    whole = reference(copy.deepcopy(model), batches, amp == "bf16")
    return parameters(model), accumulated, whole


def test_accumulating_micro_batches_gives_the_parameters_of_one_large_batch() -> None:
    initial, accumulated, whole = same_training(torch.float64, "off")
    for name, value in whole.items():
        assert not torch.equal(value, initial[name]), f"{name} was not trained"
        torch.testing.assert_close(accumulated[name], value, rtol=1e-12, atol=1e-12)


def test_under_ddp_gradients_synchronise_only_on_the_last_micro_batch(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered: list[int] = []
    original = DistributedDataParallel.no_sync

    def counting(self: DistributedDataParallel):  # type: ignore[no-untyped-def]
        entered.append(1)
        return original(self)

    monkeypatch.setattr(DistributedDataParallel, "no_sync", counting)
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{tmp_path}/rendezvous", rank=0, world_size=1
    )
    try:
        _, accumulated, whole = same_training(torch.float64, "off", DistributedDataParallel)
    finally:
        torch.distributed.destroy_process_group()
    assert len(entered) == 2 * 3, "two steps of four micro-batches: no_sync on the first three of each"
    for name, value in whole.items():
        torch.testing.assert_close(accumulated[name], value, rtol=1e-12, atol=1e-12)


def test_accumulation_under_cpu_amp_matches_one_large_batch_within_bf16_precision() -> None:
    initial, accumulated, whole = same_training(torch.float32, "bf16")
    for name, value in whole.items():
        update, expected = accumulated[name] - initial[name], value - initial[name]
        assert expected.abs().max() > 1e-3, f"{name} was not trained"
        assert (update - expected).norm() <= 0.03 * expected.norm(), name


def test_amp_runs_the_forward_pass_in_bf16_on_a_cpu() -> None:
    model = small_cnn(torch.float32)
    seen: list[torch.dtype] = []

    def loss_of(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = model(images)
        seen.append(logits.dtype)
        return nn.functional.cross_entropy(logits, labels)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for amp, dtype in (("bf16", torch.bfloat16), ("off", torch.float32)):
        seen.clear()
        AccumulatingStep(model, optimizer, RuntimeSettings(4, 1, amp), CPU).step(
            [data(4, torch.float32, 0)], loss_of
        )
        assert seen == [dtype]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="fp16 with a GradScaler needs CUDA")
def test_fp16_accumulation_with_a_grad_scaler_on_cuda() -> None:
    cuda = torch.device("cuda")
    model = small_cnn(torch.float32)
    initial = {name: value.detach().clone().to(cuda) for name, value in model.named_parameters()}
    batch = data(32, torch.float32, 1)
    results = []
    for micro, accum in ((8, 4), (32, 1)):
        settings = RuntimeSettings(micro, accum, "fp16")
        trained = prepare_model(copy.deepcopy(model), settings, cuda)
        optimizer = torch.optim.SGD(trained.parameters(), lr=0.5)
        stepper = AccumulatingStep(trained, optimizer, settings, cuda)
        assert stepper.scaler is not None
        group = list(zip(batch[0].split(micro), batch[1].split(micro), strict=True))
        stepper.step(group, lambda x, y, m=trained: nn.functional.cross_entropy(m(x), y))
        results.append({name: value.detach() for name, value in trained.named_parameters()})
    for name, value in results[1].items():
        update, expected = results[0][name] - initial[name], value - initial[name]
        assert expected.abs().max() > 1e-3, f"{name} was not trained"
        assert (update - expected).norm() <= 0.02 * expected.norm(), name


@pytest.mark.parametrize(
    ("amp", "device", "bf16", "plan"),
    [
        ("off", "cuda", True, AutocastPlan(None, scaled=False)),
        ("bf16", "cuda", True, AutocastPlan(torch.bfloat16, scaled=False)),
        ("bf16", "cuda", False, AutocastPlan(torch.float16, scaled=True)),
        ("fp16", "cuda", True, AutocastPlan(torch.float16, scaled=True)),
        ("fp16", "cpu", True, AutocastPlan(torch.bfloat16, scaled=False)),
        ("off", "cpu", True, AutocastPlan(None, scaled=False)),
    ],
)
def test_autocast_plan(amp: str, device: str, bf16: bool, plan: AutocastPlan) -> None:
    assert autocast_plan(amp, device, bf16) == plan  # type: ignore[arg-type]


def test_a_step_needs_a_micro_batch() -> None:
    model = small_cnn(torch.float32)
    stepper = AccumulatingStep(model, torch.optim.SGD(model.parameters(), lr=0.1), RuntimeSettings(4), CPU)
    with pytest.raises(ValueError, match="at least one"):
        stepper.step([], lambda x, y: x.sum())


def rewritten_environment(script: str, advice: Advice) -> dict[str, str]:
    """The ADVISOR_* variables the job would see: the submission's environment or its --export."""
    parsed = parse_job(script.encode(), "job.sh", ["job.sh"], {})
    submission = apply_advice(parsed.request, parsed.description, ["job.sh"], advice, PARTITIONS)
    env = dict(submission.env)
    for option in submission.argv:
        if option.startswith("--export="):
            items = option.removeprefix("--export=").split(",")
            env.update(item.split("=", 1) for item in items if "=" in item)  # type: ignore[misc]
    return env


JOB = (
    "#!/bin/sh\n#SBATCH --gres=gpu:2{export}\n#ADVISOR --model=resnet18 --global-batch=64 --steps=10\ntrue\n"
)


@pytest.mark.parametrize("export", ["", "\n#SBATCH --export=NONE", "\n#SBATCH --export=HOME,PATH"])
@pytest.mark.parametrize(
    ("advice", "world_size"),
    [
        (Advice(micro_batch=16, grad_accum=4, amp="bf16", channels_last=True, global_batch=64), 1),
        (Advice(micro_batch=8, grad_accum=4, amp="fp16", channels_last=False), 2),
        (Advice(gpus=1, micro_batch=32, grad_accum=2, amp="off"), 1),
    ],
)
def test_the_environment_contract_round_trips_from_advice_to_runtime_settings(
    export: str, advice: Advice, world_size: int
) -> None:
    env = rewritten_environment(JOB.format(export=export), advice)
    user = RuntimeSettings(micro_batch=64 // world_size, grad_accum=1, world_size=world_size)
    settings = read_settings(env, user)
    assert (settings.micro_batch, settings.grad_accum, settings.amp) == (
        advice.micro_batch,
        advice.grad_accum,
        advice.amp,
    )
    assert settings.channels_last == bool(advice.channels_last)
    assert settings.global_batch == 64


def test_without_advice_the_job_keeps_the_users_settings() -> None:
    user = RuntimeSettings(micro_batch=48, grad_accum=2, amp="fp16", channels_last=True)
    assert read_settings({"UNRELATED": "1"}, user) == user


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({contract.GLOBAL_BATCH: "128", contract.MICRO_BATCH: "16"}, (16, 4)),
        ({contract.GLOBAL_BATCH: "128", contract.GRAD_ACCUM: "8"}, (8, 8)),
        ({contract.GLOBAL_BATCH: "256"}, (64, 2)),
        ({contract.MICRO_BATCH: "16"}, (16, 4)),
        ({contract.GRAD_ACCUM: "8"}, (8, 8)),
        ({contract.MICRO_BATCH: "16", contract.GRAD_ACCUM: "8"}, (16, 8)),
    ],
)
def test_the_global_batch_given_or_the_users_fixes_what_the_advice_leaves_out(
    env: dict[str, str], expected: tuple[int, int]
) -> None:
    settings = read_settings(env, RuntimeSettings(micro_batch=32, grad_accum=2, world_size=2))
    assert (settings.micro_batch, settings.grad_accum) == expected


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({contract.GRAD_ACCUM: "0"}, contract.GRAD_ACCUM),
        ({contract.GRAD_ACCUM: "x"}, contract.GRAD_ACCUM),
        ({contract.MICRO_BATCH: "-4"}, contract.MICRO_BATCH),
        ({contract.MICRO_BATCH: ""}, contract.MICRO_BATCH),
        ({contract.GLOBAL_BATCH: "1.5"}, contract.GLOBAL_BATCH),
        ({contract.AMP: "fp8"}, contract.AMP),
        ({contract.AMP: "BF16"}, contract.AMP),
        ({contract.CHANNELS_LAST: "yes"}, contract.CHANNELS_LAST),
        (
            {contract.MICRO_BATCH: "16", contract.GRAD_ACCUM: "3", contract.GLOBAL_BATCH: "64"},
            contract.GLOBAL_BATCH,
        ),
        ({contract.MICRO_BATCH: "24", contract.GLOBAL_BATCH: "64"}, contract.MICRO_BATCH),
        ({contract.GLOBAL_BATCH: "63"}, contract.GLOBAL_BATCH),
        ({contract.MICRO_BATCH: "24"}, contract.MICRO_BATCH),
    ],
)
def test_invalid_advice_is_refused_naming_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(ContractError, match=named):
        read_settings(env, RuntimeSettings(micro_batch=32, world_size=2))


def test_micro_batches_groups_one_optimizer_step_at_a_time() -> None:
    assert [len(group) for group in micro_batches(range(10), 4)] == [4, 4, 2]
    assert list(micro_batches(range(4), 2)) == [[0, 1], [2, 3]]
    assert [len(group) for group in micro_batches(range(10), 4, drop_last=True)] == [4, 4]


def test_pinning_and_channels_last() -> None:
    assert not loader_options(CPU, 0)["pin_memory"]
    assert loader_options(torch.device("cuda"), 2) == {
        "num_workers": 2,
        "pin_memory": True,
        "persistent_workers": True,
    }
    images = to_device(torch.randn(2, 3, 4, 4), CPU, channels_last=True)
    assert images.is_contiguous(memory_format=torch.channels_last)
    assert not images.is_contiguous()
    assert to_device(torch.arange(3), CPU, channels_last=True).is_contiguous()
    model = prepare_model(small_cnn(torch.float32), RuntimeSettings(4, channels_last=True), CPU)
    weight = next(model.parameters())
    assert weight.is_contiguous(memory_format=torch.channels_last) and not weight.is_contiguous()
