"""A real training run that follows the advisor's advice: a torchvision CNN on CIFAR-10 or synthetic data.

The user's own settings are the flags (--batch-size is the per-process batch of one optimizer step); the
advice arrives in the environment (ADVISOR_MICRO_BATCH, ADVISOR_GRAD_ACCUM, ADVISOR_GLOBAL_BATCH,
ADVISOR_AMP, ADVISOR_CHANNELS_LAST) or as a substituted --batch-size, and `advisor.runtime` applies it
without changing the global batch the optimizer sees. --data DIR reads the CIFAR-10 python layout
(DIR/cifar-10-batches-py) when present; otherwise the images are synthetic. Under torchrun the model is
wrapped in DistributedDataParallel.

    python examples/train.py --model resnet18 --steps 20
    ADVISOR_MICRO_BATCH=16 ADVISOR_GRAD_ACCUM=4 ADVISOR_AMP=bf16 python examples/train.py --batch-size 64
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torchvision
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchvision.transforms import v2

from advisor.runtime import (
    AccumulatingStep,
    RuntimeSettings,
    loader_options,
    micro_batches,
    prepare_model,
    read_settings,
    world_size,
)

CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


class SyntheticImages(Dataset[tuple[torch.Tensor, int]]):
    """Random images and labels, the same for an index in every epoch and process."""

    def __init__(self, size: int, image_size: int, classes: int = 10) -> None:
        self.size, self.image_size, self.classes = size, image_size, classes

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        generator = torch.Generator().manual_seed(index)
        image = torch.randn(3, self.image_size, self.image_size, generator=generator)
        return image, int(torch.randint(self.classes, (), generator=generator))


def dataset(data: Path | None, image_size: int, samples: int) -> Dataset[tuple[torch.Tensor, int]]:
    if data is not None and (data / "cifar-10-batches-py").is_dir():
        transform = v2.Compose(
            [
                v2.ToImage(),
                v2.RandomHorizontalFlip(),
                v2.Resize(image_size) if image_size != 32 else v2.Identity(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(CIFAR_MEAN, CIFAR_STD),
            ]
        )
        cifar: Dataset[tuple[torch.Tensor, int]] = torchvision.datasets.CIFAR10(
            str(data), train=True, download=False, transform=transform
        )
        return cifar
    print(f"no CIFAR-10 under {data}; synthetic images" if data else "synthetic images", flush=True)
    return SyntheticImages(samples, image_size)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch-size", type=int, default=64, help="per-process samples per optimizer step")
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off")
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--data", type=Path, help="a directory with CIFAR-10's cifar-10-batches-py")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()
    if args.batch_size % args.grad_accum:
        parser.error("--batch-size must be a multiple of --grad-accum")

    distributed = "LOCAL_RANK" in os.environ
    if distributed:
        torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    micro = args.batch_size // args.grad_accum
    user = RuntimeSettings(micro, args.grad_accum, args.amp, world_size=world_size())
    settings = read_settings(os.environ, user)
    main_process = not distributed or torch.distributed.get_rank() == 0
    say = print if main_process else lambda *_, **__: None
    say(f"{settings} (global batch {settings.global_batch}) on {device}", flush=True)

    model = prepare_model(torchvision.models.get_model(args.model, num_classes=10), settings, device)
    if distributed:
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    stepper = AccumulatingStep(model, optimizer, settings, device)
    loss_fn = torch.nn.CrossEntropyLoss()

    data = dataset(args.data, args.image_size, settings.global_batch * args.steps)
    sampler: DistributedSampler[int] | None = None
    if distributed:
        sampler = DistributedSampler(data, drop_last=True)
    loader = DataLoader(
        data,
        batch_size=settings.micro_batch,
        shuffle=sampler is None,
        sampler=sampler,
        drop_last=True,
        **loader_options(device, args.workers),
    )
    if len(loader) < settings.grad_accum:
        raise SystemExit(f"the data hold no full optimizer step of {settings.global_batch} samples")
    step, epoch, started = 0, 0, time.perf_counter()
    while step < args.steps:
        if sampler is not None:
            sampler.set_epoch(epoch)
        for group in micro_batches(loader, settings.grad_accum, drop_last=True):
            loss = stepper.step(group, lambda images, labels: loss_fn(model(images), labels))
            if step % 10 == 0:
                say(f"step {step} loss {loss.item():.3f}", flush=True)
            step += 1
            if step == args.steps:
                break
        epoch += 1
    elapsed = time.perf_counter() - started
    samples = args.steps * settings.global_batch
    say(
        f"{args.steps} steps of global batch {settings.global_batch} in {elapsed:.2f} s "
        f"({samples / elapsed:.1f} samples/s)",
        flush=True,
    )
    if distributed:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
