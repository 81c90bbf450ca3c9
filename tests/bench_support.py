"""What the benchmark tests share: a tiny configuration and one torch thread on a shared 2-core host."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from advisor.records import StepConfig

CPU = torch.device("cpu")
TINY = StepConfig(
    model="squeezenet1_1", input_size=32, batch=2, amp=False, channels_last=False, pinned=False, workers=0
)


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """Two threads on two shared cores spend more time waiting for each other than computing."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
