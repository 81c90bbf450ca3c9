"""Step time of one optimizer step under gradient accumulation, AMP and pinned memory, alone and together.

Run: python -m benchmarks.runtime_speedup [--models resnet18,mobilenet_v3_small,shufflenet_v2_x1_0]
     [--global-batch 64] [--accum 4] [--steps 8] [--threads 1] [--device cpu|cuda] [--size 32]

Every configuration trains the same global batch through `advisor.runtime` from an in-memory DataLoader
(SIZE x SIZE images, 10 classes) and prints the median optimizer-step time and the speed-up over the
baseline (whole batch, fp32, unpinned); on CUDA each step's end is a device synchronisation. fp16 trains
with a GradScaler (`advisor.runtime`'s autocast plan); "all together" is accumulation, bf16 and pinned
memory. On a CPU these knobs are not what they are on a GPU: accumulation only
splits the batch into smaller, less efficient pieces (its use is fitting a batch that would not fit a
GPU's memory); AMP (bf16) is often slower, since many CPUs lack fast bf16 arithmetic and autocast adds
casts; and pinned memory does nothing useful without a GPU to copy to (torch does not even pin then; the
table says whether batches arrived pinned). The published up-to-70% gains are single-GPU figures.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import torch
import torchvision
from torch.utils.data import DataLoader, TensorDataset

from advisor.runtime import AccumulatingStep, Amp, RuntimeSettings, micro_batches, prepare_model


@dataclass(frozen=True)
class KnobSet:
    name: str
    accumulate: bool
    amp: Amp
    pinned: bool


CONFIGS = [
    KnobSet("baseline", accumulate=False, amp="off", pinned=False),
    KnobSet("accumulation", accumulate=True, amp="off", pinned=False),
    KnobSet("amp bf16", accumulate=False, amp="bf16", pinned=False),
    KnobSet("amp fp16", accumulate=False, amp="fp16", pinned=False),
    KnobSet("pinned memory", accumulate=False, amp="off", pinned=True),
    KnobSet("all together", accumulate=True, amp="bf16", pinned=True),
]


def step_time(
    model_name: str,
    config: KnobSet,
    global_batch: int,
    accum: int,
    steps: int,
    device: torch.device,
    size: int,
) -> tuple[float, bool]:
    """Median seconds per optimizer step (after two warm-up steps) and whether batches came pinned."""
    torch.manual_seed(0)
    grad_accum = accum if config.accumulate else 1
    settings = RuntimeSettings(global_batch // grad_accum, grad_accum, config.amp)
    model = prepare_model(torchvision.models.get_model(model_name, num_classes=10), settings, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    stepper = AccumulatingStep(model, optimizer, settings, device)
    loss_fn = torch.nn.CrossEntropyLoss()
    samples = global_batch * (steps + 2)
    data = TensorDataset(torch.randn(samples, 3, size, size), torch.randint(0, 10, (samples,)))
    loader = DataLoader(data, batch_size=settings.micro_batch, pin_memory=config.pinned)
    times, pinned = [], False
    marked = time.perf_counter()
    for index, group in enumerate(micro_batches(loader, grad_accum, drop_last=True)):
        pinned = group[0][0].is_pinned()
        stepper.step(group, lambda images, labels: loss_fn(model(images), labels))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        now = time.perf_counter()
        if index >= 2:
            times.append(now - marked)
        marked = now
    return statistics.median(times), pinned


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="resnet18,mobilenet_v3_small,shufflenet_v2_x1_0")
    parser.add_argument("--global-batch", type=int, default=64)
    parser.add_argument("--accum", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--size", type=int, default=32, help="image side (224 for ImageNet-sized inputs)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda":
        where = f"{torch.cuda.get_device_name(device)} (bf16: {torch.cuda.is_bf16_supported()})"
    else:
        bf16 = torch.ops.mkldnn._is_mkldnn_bf16_supported()
        where = f"CPU {torch.backends.cpu.get_cpu_capability()} (native bf16: {'yes' if bf16 else 'no'})"
    print(
        f"torch {torch.__version__}, {where}, {args.threads} thread(s), global batch {args.global_batch},"
        f" accumulation {args.accum} x {args.global_batch // args.accum}, {args.size}x{args.size},"
        f" median of {args.steps} steps"
    )
    print(f"{'model':<20} {'configuration':<15} {'step ms':>9} {'speed-up':>9} {'pinned':>7}")
    for model_name in args.models.split(","):
        baseline = None
        for config in CONFIGS:
            seconds, pinned = step_time(
                model_name, config, args.global_batch, args.accum, args.steps, device, args.size
            )
            baseline = baseline or seconds
            print(
                f"{model_name:<20} {config.name:<15} {seconds * 1000:>9.1f} {baseline / seconds:>8.2f}x"
                f" {'yes' if pinned else 'no':>7}",
                flush=True,
            )


if __name__ == "__main__":
    main()
