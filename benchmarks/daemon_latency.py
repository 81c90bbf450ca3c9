"""Latency of the advice path, on the real sandbox cluster with a real daemon.

1. `advise-submit --dry-run SCRIPT` against a warm daemon, against plain `sbatch --test-only SCRIPT`:
   median of each and the overhead (target: at most 300 ms).
2. 50 concurrent clients x 20 `/advise` requests each on the daemon's socket: errors, p50 and p99
   (goal: p99 at most 100 ms).

Predictors come from the test suite's relabelled CPU measurements (`tests/recommend_support.py`).
Run from the repository root: ``python benchmarks/daemon_latency.py [--runs N] [--clients 50]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.api import AdviseRequest  # noqa: E402 (after the path set-up)
from advisor.daemon.transport import UnixHTTPConnection  # noqa: E402
from advisor.sandbox.cluster import Sandbox  # noqa: E402
from advisor.sandbox.spec import load_spec  # noqa: E402
from tests.conftest import free_port_block  # noqa: E402
from tests.recommend_support import trained_store  # noqa: E402

BIN = Path(sys.executable).parent
SCRIPT = """#!/bin/sh
#SBATCH --partition=t4
#SBATCH --gres=gpu:1
#SBATCH --time=12:00:00
#SBATCH --output=/dev/null
#ADVISOR --model=resnet18 --num-classes=10 --input-shape=3,32,32 --global-batch=64 --steps=100000
sleep 600
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="advisor-latency-") as folder:
        root = Path(folder)
        spec = load_spec(ROOT / "etc" / "sandbox.toml")
        sandbox = Sandbox(
            spec.model_copy(update={"base_port": free_port_block(spec.port_count())}), root / "sb"
        )
        sandbox.up()
        daemon = None
        try:
            trained_store(root)
            (root / "policy.toml").write_text('mode = "rewrite"\n', encoding="utf-8")
            env = {
                **os.environ,
                "SLURM_CONF": sandbox.client_env()["SLURM_CONF"],
                "ADVISOR_SOCKET": str(root / "advisor.sock"),
                "ADVISOR_ALLOW_ROOT": "1",
                "ADVISOR_TIMEOUT": "30",
            }
            argv = [
                str(BIN / "advisor"),
                "daemon",
                "--socket",
                env["ADVISOR_SOCKET"],
                "--db",
                str(root / "advisor.db"),
            ]
            argv += ["--policy", str(root / "policy.toml"), "--log-level", "WARNING"]
            daemon = subprocess.Popen(argv, env=env)
            while not (root / "advisor.sock").exists():
                time.sleep(0.2)
            script = root / "train.sbatch"
            script.write_text(SCRIPT, encoding="utf-8")
            _dry_run_overhead(script, env, args.runs)
            _concurrency(root / "advisor.sock", SCRIPT.encode(), args.clients, args.requests)
        finally:
            if daemon is not None:
                daemon.terminate()
                daemon.wait()
            sandbox.down()
    return 0


def _timed(argv: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=True)
    return time.perf_counter() - began


def _dry_run_overhead(script: Path, env: dict[str, str], runs: int) -> None:
    _timed([str(BIN / "advise-submit"), "--dry-run", str(script)], env)  # warm the daemon's caches
    advised, plain = [], []
    for _ in range(runs):
        advised.append(_timed([str(BIN / "advise-submit"), "--dry-run", str(script)], env))
        plain.append(_timed(["sbatch", "--test-only", str(script)], env))
    a, p = statistics.median(advised), statistics.median(plain)
    print(f"advise-submit --dry-run: median {a * 1000:.0f} ms over {runs} runs")
    print(f"sbatch --test-only:      median {p * 1000:.0f} ms")
    print(f"overhead:                {(a - p) * 1000:.0f} ms (target <= 300 ms)")


def _concurrency(socket: Path, script: bytes, clients: int, requests: int) -> None:
    body = (
        AdviseRequest.of(script, where="train.sbatch", sbatch_argv=["train.sbatch"])
        .model_dump_json()
        .encode()
    )
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        for _ in range(requests):
            began = time.perf_counter()
            connection = UnixHTTPConnection(socket, timeout=60)
            try:
                connection.request("POST", "/advise", body=body, headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                detail = response.read()
                ok = response.status == 200
            except OSError as error:
                ok, response = False, None
                with lock:
                    errors.append(repr(error))
            finally:
                connection.close()
            with lock:
                latencies.append(time.perf_counter() - began)
                if not ok and response is not None:
                    errors.append(f"HTTP {response.status}: {detail[:300]!r}")

    threads = [threading.Thread(target=client) for _ in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    latencies.sort()
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    answered = len(latencies)
    print(f"{clients} clients x {requests} requests: {len(errors)} errors, {answered} answers, {wall:.1f} s")
    print(f"latency p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms (goal p99 <= 100 ms)")
    for error in sorted(set(errors))[:5]:
        print(f"error: {error}")


if __name__ == "__main__":
    sys.exit(main())
