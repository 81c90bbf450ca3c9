"""Training steps measured on a CPU each in a process of its own, as a user's job runs them.

A user's job is a fresh process whose heap holds only its own loop: glibc maps each request over its
threshold (at most 32 MiB) fresh and faults its pages in at every step. The nightly job runs for an hour;
its heap grows free chunks that large, and a step measured in it costs what a heap-only process pays
(pass J: tiny_llama at batch 64 171-174 ms in the job, 248-316 ms in fresh processes; benchmarks/README.md).
Each step is therefore measured in a child forked from a server that has imported torch and the model
libraries and run nothing (`multiprocessing`'s fork server), and paced by the child's own pace step: the
job's, timed in a process the grid's items had shaped, rose 23% over its first layers while the children's
fell 16% with the steps they paced (benchmarks/README.md). Layer items stay
in the job's process (3 of 300 moved, and a fork each doubles their time); so does every item on a GPU,
whose caching allocator keeps its blocks.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path

import torch

from advisor.bench.measure import measure_step, unmeasured_step
from advisor.introspect.table_cache import keep_tables_in, table_folder
from advisor.records import StepConfig, StepMeasurement

SERVER_PRELOAD = (
    "advisor.bench.measure",
    "torchvision.models",
    "transformers.models.auto.modeling_auto",
    *(f"transformers.models.{kind}.modeling_{kind}" for kind in ("gpt2", "bert", "t5", "llama", "vit")),
)
"""Imported once by the fork server, so that no child waits for them: the measuring code and the model
libraries the zoo's steps build from (where one is missing, its steps import nothing either)."""


def _start(threads: int, tables: Path | None) -> None:
    """The child's settings, as the job's own: its threads, its tables' folder."""
    torch.set_num_threads(threads)
    keep_tables_in(tables)


class StepsApart:
    """A pool of one worker at a time, each forked from the server and gone after one step; a pool a
    dying child broke is replaced, so that one step's crash costs only that step."""

    def __init__(self, pool: Callable[[], ProcessPoolExecutor]) -> None:
        self._new_pool = pool
        self.pool = pool()

    def measure(
        self,
        config: StepConfig,
        device: torch.device,
        steps: int,
        warmup: int,
        memory_limit_bytes: int | None,
        *,
        allow_factories: bool,
    ) -> StepMeasurement:
        """`measure_step` in a fresh child; a child that dies is the step's error."""
        future = self.pool.submit(
            measure_step, config, device, steps, warmup, memory_limit_bytes, allow_factories=allow_factories
        )
        try:
            return future.result()
        except BrokenProcessPool as died:
            self.close()
            self.pool = self._new_pool()
            return unmeasured_step(config, "", steps, f"the process measuring it died: {died}")

    def close(self) -> None:
        self.pool.shutdown()


@contextmanager
def steps_apart() -> Iterator[StepsApart]:
    """Steps apart for one run, its pool shut down after it (the fork server lives as long as this
    process)."""
    server = multiprocessing.get_context("forkserver")
    server.set_forkserver_preload(list(SERVER_PRELOAD))
    threads, tables = torch.get_num_threads(), table_folder()
    apart = StepsApart(
        lambda: ProcessPoolExecutor(
            1, mp_context=server, initializer=_start, initargs=(threads, tables), max_tasks_per_child=1
        )
    )
    try:
        yield apart
    finally:
        apart.close()
