"""The communication benchmark a partition runs as one Slurm job of several tasks (``srun``): all-reduces
over message sizes within a node (2..N ranks) and across its nodes, and a zoo model's data-parallel step
against the same step without communication.

Run as ``srun python -m advisor.comm.allreduce --out FILE --partition P``: NCCL on GPUs, gloo on CPUs. Rank
0 writes one JSON line per size and spread, and one per measured step, each as it is measured; every rank
takes part in every collective, as torch.distributed asks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from advisor.bench.fingerprint import fingerprint, threads_for_job
from advisor.bench.results import jsonl_sink
from advisor.comm.lines import AllReduceLine, WholeStepLine
from advisor.comm.sync import Spread

_WARMUP = 2
_REPEATS = 5
_FIRST_BYTES = 2**10
_COLLECTIVE_TIMEOUT = timedelta(minutes=3)
"""Far above a 1 GiB all-reduce on a slow network, far below the job's limit: a rendezvous or collective
that hangs (a rank that never came, a port taken) fails the job rather than holding its nodes."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    env = os.environ
    rank, world = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])
    local, nodes = int(env.get("SLURM_LOCALID", "0")), int(env.get("SLURM_NNODES", "1"))
    if world % nodes:
        print("advisor comm: the tasks must be spread evenly over the nodes", file=sys.stderr)
        return 2
    torch.set_num_threads(threads_for_job(env))
    cuda = torch.cuda.is_available() and not args.cpu
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    os.environ.setdefault("MASTER_ADDR", env.get("SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1"))
    # Below the kernel's ephemeral ports (32768 up), where an outgoing connection could hold it.
    os.environ.setdefault("MASTER_PORT", str(20000 + int(env.get("SLURM_JOB_ID", "0")) % 10000))
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(
        backend, rank=rank, world_size=world, device_id=device if cuda else None, timeout=_COLLECTIVE_TIMEOUT
    )
    try:
        here = fingerprint(args.partition)
        common = {
            "partition": args.partition,
            "machine": here.machine(),
            "network": f"{backend} {env.get('SLURM_JOB_NODELIST', here.node)}",
            "measured_at": datetime.now(UTC),
        }
        per_node = world // nodes
        # Rank 0 writes each line as it is measured, so a job cut short keeps what it measured.
        write = jsonl_sink(args.out) if rank == 0 else (lambda line: None)
        for members, spread in _spreads(per_node, nodes):
            group = dist.new_group(members)  # every rank makes every group; members get a ProcessGroup
            mine = group if isinstance(group, dist.ProcessGroup) else None
            for size in _sizes(args.max_bytes):
                seconds = _all_reduce_s(size, device, mine)
                write(AllReduceLine(**common, spread=spread, bytes=size, seconds=seconds))
            if spread.devices not in (2, per_node, world):
                continue
            for model in filter(None, args.models.split(",")):
                measured = _whole_step(model, args.batch, args.input_size, device, mine)
                compute_s, step_s, gradient_bytes = measured
                write(
                    WholeStepLine(
                        **common,
                        spread=spread,
                        model=model,
                        batch=args.batch,
                        input_size=args.input_size,
                        gradient_bytes=gradient_bytes,
                        compute_s=compute_s,
                        step_s=step_s,
                    )
                )
    finally:
        dist.destroy_process_group()
    return 0


def _spreads(per_node: int, nodes: int) -> list[tuple[list[int], Spread]]:
    """Ranks lie node by node (Slurm's block distribution): 2, 4, .. and all ranks of the first node, then
    one rank per node, then every rank."""
    found: list[tuple[list[int], Spread]] = []
    counts = sorted({n for n in (2, 4, 8, 16) if n < per_node} | ({per_node} if per_node > 1 else set()))
    found += [(list(range(k)), Spread(devices=k, nodes=1)) for k in counts]
    if nodes > 1:
        found.append(([node * per_node for node in range(nodes)], Spread(devices=nodes, nodes=nodes)))
        if per_node > 1:
            found.append((list(range(per_node * nodes)), Spread(devices=per_node * nodes, nodes=nodes)))
    return found


def _sizes(max_bytes: int) -> list[int]:
    """1 KiB, 4 KiB, ... up to ``max_bytes``: nccl-tests' sweep at a factor of four."""
    sizes, size = [], _FIRST_BYTES
    while size <= max_bytes:
        sizes.append(size)
        size *= 4
    return sizes


def _all_reduce_s(size: int, device: torch.device, group: dist.ProcessGroup | None) -> float:
    """The median all-reduce of ``size`` bytes in ``group`` (None: this rank is not in it)."""
    buffer = torch.ones(size // 4, dtype=torch.float32, device=device) if group is not None else None

    def reduce() -> None:
        if buffer is not None:
            dist.all_reduce(buffer, group=group)

    return _median_s(reduce, device)


def _whole_step(
    model: str, batch: int, size: int, device: torch.device, group: dist.ProcessGroup | None
) -> tuple[float, float, int]:
    """One rank's step alone (every rank at once, as they share the nodes), then the same step under
    DistributedDataParallel in ``group`` (None: this rank is not in it and steps alone meanwhile): the
    step's compute, the data-parallel step, and the gradients' bytes."""
    import torchvision
    from torch.nn.parallel import DistributedDataParallel

    from advisor.bench.zoo import zoo_model

    torch.manual_seed(0)
    network = torchvision.models.get_model(model, **zoo_model(model).kwargs(size)).to(device)
    gradient_bytes = sum(p.numel() * p.element_size() for p in network.parameters() if p.requires_grad)
    images = torch.randn(batch, 3, size, size, device=device)
    labels = torch.zeros(batch, dtype=torch.long, device=device)
    compute_s = _step_s(network, images, labels, device)
    if group is None:  # keeps the node as busy as the members' steps make it
        return compute_s, _step_s(network, images, labels, device), gradient_bytes
    devices = [device.index] if device.type == "cuda" else None
    parallel = DistributedDataParallel(network, device_ids=devices, process_group=group)
    return compute_s, _step_s(parallel, images, labels, device), gradient_bytes


def _step_s(network: nn.Module, images: torch.Tensor, labels: torch.Tensor, device: torch.device) -> float:
    optimizer = torch.optim.SGD(network.parameters(), lr=0.01)
    loss_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = nn.functional.cross_entropy

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_of(network(images), labels).backward()  # type: ignore[no-untyped-call]  # torch leaves it untyped
        optimizer.step()

    return _median_s(step, device)


def _median_s(work: Callable[[], None], device: torch.device) -> float:
    """The median of timed repeats after warm-ups, each started together (a barrier) and counted as the
    slowest rank saw it."""
    times = []
    for index in range(_WARMUP + _REPEATS):
        dist.barrier()
        started = time.perf_counter()
        work()
        _sync(device)
        elapsed = torch.tensor([time.perf_counter() - started], device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if index >= _WARMUP:
            times.append(float(elapsed.item()))
    return statistics.median(times)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m advisor.comm.allreduce", description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="JSON-lines file rank 0 appends to")
    parser.add_argument("--partition", required=True, help="recorded with each line")
    parser.add_argument("--max-bytes", type=int, default=2**30, help="the largest all-reduce (default 1 GiB)")
    parser.add_argument(
        "--models", default="", help="zoo models (comma-separated) whose data-parallel steps are measured too"
    )
    parser.add_argument("--batch", type=int, default=8, help="its batch per rank")
    parser.add_argument("--input-size", type=int, default=32, help="its image side")
    parser.add_argument("--cpu", action="store_true", help="gloo on the CPU even where CUDA is seen")
    return parser


if __name__ == "__main__":
    sys.exit(main())
