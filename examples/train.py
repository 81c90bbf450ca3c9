"""A small real training run: a torchvision CNN on synthetic CIFAR-sized data.

The batch size comes from --batch-size, which the advisor may substitute, or from the environment
contract (ADVISOR_MICRO_BATCH) when the job declares that instead.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torchvision
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch-size", type=int, default=int(os.environ.get("ADVISOR_MICRO_BATCH", "64")))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--image-size", type=int, default=32)
    args = parser.parse_args()

    model = torchvision.models.get_model(args.model, num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    labels = torch.randint(0, 10, (args.batch_size,))
    started = time.perf_counter()
    for step in range(args.steps):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    elapsed = time.perf_counter() - started
    print(f"{args.steps} steps of batch {args.batch_size} in {elapsed:.2f} s", flush=True)


if __name__ == "__main__":
    main()
