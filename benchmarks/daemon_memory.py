"""The daemon's resident memory after its start, with the settings' ``preload_model_libraries`` on and off.

Each round starts `advisor daemon` once per setting, the order alternating round by round, each in a fresh
state folder (no Slurm is needed: its background reads of Slurm fail and are logged); waits for /health,
then for the start's line on the model libraries (loaded, or left to the first ``hf:``/``timm:`` job) and
``--settle`` seconds more and reads VmRSS from /proc/PID/status; then sends one `/advise` of a torchvision
job and one of a ``timm:`` job (each builds its layer table in the daemon, loading torch and then timm where
nothing has yet; the answer is Slurm's error, as no Slurm is there) and reads VmRSS after each, each
answer timed; and stops it. Prints each round, the medians and the load's own seconds, as the daemon
logged them.

Run from the repository root: ``python -m benchmarks.daemon_memory [--rounds 3] [--settle 10]``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

from advisor.api import AdviseRequest
from advisor.daemon.transport import UnixHTTPConnection
from tests.daemon_support import Daemon, vm_rss

LINE = re.compile(r"model libraries (loaded: .*\((?P<seconds>[0-9.]+) s\)|left to the first)")
JOB = "#!/bin/sh\n#SBATCH --partition=t4\n#SBATCH --gres=gpu:1\n#SBATCH --time=2:00:00\n#ADVISOR {}\ntrue\n"
TORCHVISION = JOB.format(
    "--model=resnet18 --num-classes=10 --input-shape=3,32,32 --global-batch=64 --steps=100"
)
TIMM = JOB.format("--model=timm:resnet18 --input-shape=3,224,224 --global-batch=64 --steps=100")
FIGURES = ("started", "after a torchvision job", "after a timm: job")
ANSWERED = ("torchvision job answered (s)", "timm: job answered (s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds after the libraries' line")
    args = parser.parse_args()
    rows: dict[bool, list[tuple[float, ...]]] = {True: [], False: []}
    loads: list[float] = []
    print(f"round  preload  {'  '.join(f'{name} (MiB)' for name in FIGURES)}  {'  '.join(ANSWERED)}")
    for round_ in range(args.rounds):
        for preload in (True, False) if round_ % 2 == 0 else (False, True):
            row, load_s = _measure(preload, args.settle)
            rows[preload].append(row)
            loads += [] if load_s is None else [load_s]
            print(f"{round_ + 1:>5}  {str(preload).lower():>7}  {_row(row)}", flush=True)
    for preload in (True, False):
        medians = tuple(statistics.median(column) for column in zip(*rows[preload], strict=True))
        print(f"median  {str(preload).lower():>6}  {_row(medians)}")
    took = ", ".join(f"{s:.1f}" for s in loads)
    print(f"the background load with preload on took {took} s (the daemon's log lines)")
    return 0


def _row(row: tuple[float, ...]) -> str:
    memory = [f"{mib:>{len(name) + 6},.0f}" for mib, name in zip(row, FIGURES, strict=False)]
    seconds = [f"{s:>{len(name)}.1f}" for s, name in zip(row[len(FIGURES) :], ANSWERED, strict=True)]
    return "  ".join(memory + seconds)


def _measure(preload: bool, settle: float) -> tuple[tuple[float, ...], float | None]:
    """One daemon's VmRSS in MiB once started and settled, after a torchvision job and after a timm: job,
    and each job's seconds; and its libraries' load in seconds (None: not preloaded)."""
    with tempfile.TemporaryDirectory(prefix="advisor-memory-") as folder:
        root = Path(folder)
        config = root / "advisor.toml"
        lines = [f'state_dir = "{root}"', f'socket = "{root / "advisor.sock"}"']
        lines += [f"preload_model_libraries = {str(preload).lower()}"]
        lines += ["allow_root = true"] if os.geteuid() == 0 else []
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        daemon = Daemon(root, dict(os.environ), config=config)
        daemon.start()  # until it answers /health
        assert daemon.process is not None
        try:
            said = _libraries_line(daemon)
            time.sleep(settle)
            started = _vm_rss_mib(daemon.process.pid)
            torchvision_s = _advise(root / "advisor.sock", TORCHVISION)
            torchvision = _vm_rss_mib(daemon.process.pid)
            timm_s = _advise(root / "advisor.sock", TIMM)
            row = (started, torchvision, _vm_rss_mib(daemon.process.pid), torchvision_s, timm_s)
            return row, None if said is None else float(said)
        finally:
            daemon.stop()


def _advise(socket: Path, script: str) -> float:
    """One `/advise` of ``script``, answered whatever the answer: its seconds."""
    body = AdviseRequest.of(script.encode(), where="job.sh", sbatch_argv=["job.sh"]).model_dump_json()
    began = time.perf_counter()
    connection = UnixHTTPConnection(socket, timeout=300)
    try:
        connection.request(
            "POST", "/advise", body=body.encode(), headers={"Content-Type": "application/json"}
        )
        connection.getresponse().read()
    finally:
        connection.close()
    return time.perf_counter() - began


def _libraries_line(daemon: Daemon, seconds: float = 300) -> str | None:
    """Waits for the daemon's line on its libraries' load: the load's seconds (None: not preloaded)."""
    deadline = time.monotonic() + seconds
    while (found := LINE.search((daemon.root / "daemon.log").read_text(errors="replace"))) is None:
        if time.monotonic() > deadline:
            raise SystemExit("the daemon did not log its libraries' line in time")
        time.sleep(0.2)
    return found.group("seconds")


def _vm_rss_mib(pid: int) -> float:
    return vm_rss(pid) / 2**20


if __name__ == "__main__":
    raise SystemExit(main())
