"""Latency of the advice path, on the real sandbox cluster with a real daemon.

1. `advise-submit --dry-run SCRIPT` against a warm daemon, against plain `sbatch --test-only SCRIPT`:
   median of each and the overhead (target: at most 300 ms).
2. 50 concurrent clients x 20 `/advise` requests each on the daemon's socket, warmed by one request and
   one burst of `/health`: errors, p50 and p99 (goal: p99 at most 50 ms).
3. 100 identical concurrent `/advise` requests the daemon has not seen: the Slurm calls they cost
   (slurmctld's own RPC counts from `sdiag`; goal: one query set, not one per request), p50 and p99.
4. Another local user (nobody) holds 600 idle connections while `/health` and one `/advise` are timed
   (goal: both answered).
5. 100 varied `/advise` requests one after another, as users submit (partition, GPUs, batch, length and
   limit differ; a few repeat): the Slurm commands the daemon ran per request, from its own `/metrics`
   (`advisor_slurm_commands_total`), and slurmctld's RPCs from `sdiag` (goal: at most 5 per request on
   average).
6. Plain `sbatch --test-only SCRIPT` with the advisor's cli_filter loaded and without: median of each over
   ``--runs``, interleaved, and the filter's added latency (the helper's start and one `/advise`); with
   ``--before TREE``, an older tree's filter in the same rounds (`benchmarks/filter_latency.py`).

The daemon runs with 1024 file descriptors, the default a unit without LimitNOFILE gets.

Predictors come from the test suite's relabelled CPU measurements (`tests/recommend_support.py`).
Run from the repository root: ``python -m benchmarks.daemon_latency [--runs N] [--clients 50] [--only filter]
[--before TREE]``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from advisor.api import AdviseRequest
from advisor.daemon.transport import UnixHTTPConnection
from advisor.sandbox.cluster import Sandbox
from benchmarks.filter_latency import filter_overhead, timed
from tests.conftest import sandbox_spec
from tests.recommend_support import trained_store

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
    parser.add_argument("--identical", type=int, default=100)
    parser.add_argument("--idle", type=int, default=600)
    parser.add_argument("--varied", type=int, default=100)
    parser.add_argument("--only", choices=["filter"], help="run one section alone")
    parser.add_argument("--before", type=Path, help="an older tree's cli_filter, in the same rounds (6)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="advisor-latency-") as folder:
        root = Path(folder)
        sandbox = Sandbox(sandbox_spec(), root / "sb")
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
            daemon = subprocess.Popen(argv, env=env, preexec_fn=_default_descriptors)
            while not (root / "advisor.sock").exists():
                time.sleep(0.2)
            script = root / "train.sbatch"
            script.write_text(SCRIPT, encoding="utf-8")
            if args.only is None:
                _dry_run_overhead(script, env, args.runs)
                _concurrency(root / "advisor.sock", SCRIPT.encode(), args.clients, args.requests)
                _identical_burst(root / "advisor.sock", env, args.identical)
                _idle_connections(root / "advisor.sock", args.idle)
                _varied_submissions(root / "advisor.sock", env, args.varied)
            filter_overhead(root, script, env, args.runs, args.before)
            if daemon.poll() is not None:
                print(f"the daemon exited with status {daemon.returncode}")
        finally:
            if daemon is not None:
                daemon.terminate()
                daemon.wait()
            sandbox.down()
    return 0


def _default_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


def _dry_run_overhead(script: Path, env: dict[str, str], runs: int) -> None:
    timed([str(BIN / "advise-submit"), "--dry-run", str(script)], env)  # warm the daemon's caches
    advised, plain = [], []
    for _ in range(runs):
        advised.append(timed([str(BIN / "advise-submit"), "--dry-run", str(script)], env))
        plain.append(timed(["sbatch", "--test-only", str(script)], env))
    a, p = statistics.median(advised), statistics.median(plain)
    print(f"advise-submit --dry-run: median {a * 1000:.0f} ms over {runs} runs")
    print(f"sbatch --test-only:      median {p * 1000:.0f} ms")
    print(f"overhead:                {(a - p) * 1000:.0f} ms (target <= 300 ms)")


def _health_burst(socket: Path, clients: int) -> None:
    def client() -> None:
        connection = UnixHTTPConnection(socket, timeout=60)
        try:
            connection.request("GET", "/health")
            connection.getresponse().read()
        finally:
            connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _concurrency(socket: Path, script: bytes, clients: int, requests: int) -> None:
    body = (
        AdviseRequest.of(script, where="train.sbatch", sbatch_argv=["train.sbatch"])
        .model_dump_json()
        .encode()
    )
    # Warm, as a daemon that has run for a while is: its answer to this request (the cold answer is what the
    # identical burst below measures), and a first burst of connections, whose set-up costs the client's
    # threads and a fresh event loop or thread pool about 200 ms once.
    _post(socket, body)
    _health_burst(socket, clients)
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
    print(f"latency p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms (goal p99 <= 50 ms)")
    for error in sorted(set(errors))[:5]:
        print(f"error: {error}")


def _ms(latencies: list[float], quantile: float) -> str:
    return f"{latencies[min(len(latencies) - 1, int(len(latencies) * quantile))] * 1000:.0f} ms"


def _post(socket: Path, body: bytes, timeout: float = 120) -> tuple[int | None, float]:
    """One `/advise`: its HTTP status (None: no answer) and how long it took."""
    began = time.perf_counter()
    connection = UnixHTTPConnection(socket, timeout=timeout)
    try:
        connection.request("POST", "/advise", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        status: int | None = response.status
    except OSError:
        status = None
    finally:
        connection.close()
    return status, time.perf_counter() - began


def _rpc_counts(env: dict[str, str]) -> dict[str, int]:
    """slurmctld's count of each RPC type it served, from `sdiag`."""
    out = subprocess.run(["sdiag"], env=env, capture_output=True, text=True, check=True).stdout
    section = out.split("by message type", 1)[1].split("by user", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^\s*(\w+)\s+\(\s*\d+\)\s+count:(\d+)", section, re.M)}


def _identical_burst(socket: Path, env: dict[str, str], count: int) -> None:
    script = SCRIPT.replace(
        "#SBATCH --time=12:00:00", f"#SBATCH --time=12:00:00\n#SBATCH --job-name=b{time.time_ns()}"
    )
    body = AdviseRequest.of(script.encode(), where="burst.sbatch", sbatch_argv=["burst.sbatch"])
    data = body.model_dump_json().encode()
    results: list[tuple[int | None, float]] = []
    lock = threading.Lock()
    start = threading.Barrier(count)

    def client() -> None:
        start.wait()
        result = _post(socket, data)
        with lock:
            results.append(result)

    before = _rpc_counts(env)
    threads = [threading.Thread(target=client) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after = _rpc_counts(env)
    spent = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    latencies = sorted(took for _, took in results)
    statuses = statistics.multimode(status for status, _ in results)
    answered = sum(status == 200 for status, _ in results)
    print(
        f"{count} identical new requests: {answered} answered 200 (most common status {statuses}), "
        f"p50 {_ms(latencies, 0.5)}, p99 {_ms(latencies, 0.99)}"
    )
    print(
        f"  slurmctld RPCs: {spent.get('REQUEST_JOB_WILL_RUN', 0)} --test-only (REQUEST_JOB_WILL_RUN), "
        f"{sum(spent.values())} in all"
    )


def _slurm_commands(socket: Path) -> dict[str, float]:
    """The daemon's own count of the Slurm commands it ran, by command, from its `/metrics`."""
    connection = UnixHTTPConnection(socket, timeout=60)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    counts: dict[str, float] = {}
    for match in re.finditer(
        r'^advisor_slurm_commands_total\{command="(\w+)",result="\w+"\} (\S+)$', text, re.M
    ):
        counts[match[1]] = counts.get(match[1], 0.0) + float(match[2])
    return counts


def _varied_submissions(socket: Path, env: dict[str, str], count: int) -> None:
    bodies = []
    for index in range(count):
        partition = ("t4", "v100", "a100")[index % 3]
        gpus, batch = (1, 2)[index % 2], (32, 64, 128)[(index // 2) % 3]
        hours, steps = (1, 6, 12)[(index // 3) % 3], 20_000 + 10_000 * (index % 5)
        script = (
            SCRIPT.replace("#SBATCH --partition=t4", f"#SBATCH --partition={partition}")
            .replace("#SBATCH --gres=gpu:1", f"#SBATCH --gres=gpu:{gpus}")
            .replace("#SBATCH --time=12:00:00", f"#SBATCH --time={hours:02d}:00:00")
            .replace("--global-batch=64", f"--global-batch={batch}")
            .replace("--steps=100000", f"--steps={steps}")
        )
        bodies.append(
            AdviseRequest.of(script.encode(), where="v.sbatch", sbatch_argv=["v.sbatch"]).model_dump_json()
        )
    distinct = len(set(bodies))
    before, rpcs_before = _slurm_commands(socket), _rpc_counts(env)
    latencies, errors = [], 0
    for body in bodies:
        status, took = _post(socket, body.encode())
        latencies.append(took)
        errors += status != 200
    after, rpcs_after = _slurm_commands(socket), _rpc_counts(env)
    spent = {
        name: after[name] - before.get(name, 0.0) for name in after if after[name] > before.get(name, 0.0)
    }
    rpcs = sum(rpcs_after.get(name, 0) - rpcs_before.get(name, 0) for name in rpcs_after)
    shown = ", ".join(f"{name} {value:.0f}" for name, value in sorted(spent.items()))
    print(
        f"{count} varied requests ({distinct} distinct), {errors} errors, p50 {_ms(sorted(latencies), 0.5)}"
    )
    print(
        f"  Slurm commands the daemon ran: {sum(spent.values()) / count:.2f} per request ({shown}); "
        f"slurmctld RPCs {rpcs / count:.2f} per request (goal <= 5)"
    )


_HOLDER = """
import socket, sys, time
held = []
for _ in range(int(sys.argv[2])):
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(sys.argv[1])
        connection.sendall(b"POST /advise HTTP/1.1\\r\\n")  # and then nothing more
        held.append(connection)
    except OSError:
        connection.close()
time.sleep(2)
def is_open(connection):
    try:
        return connection.recv(1, socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
print(len(held), sum(map(is_open, held)), flush=True)
time.sleep(3600)
"""


def _idle_connections(socket: Path, count: int) -> None:
    """Another local user (nobody) opens ``count`` connections and never finishes a request on them."""
    socket.parent.chmod(0o755)
    holder = subprocess.Popen(
        ["/usr/bin/python3", "-c", _HOLDER, str(socket), str(count)],
        user="nobody",
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        held, still_open = map(int, holder.stdout.readline().split())
        began = time.perf_counter()
        health = UnixHTTPConnection(socket, timeout=10)
        try:
            health.request("GET", "/health")
            status: object = health.getresponse().status
        except OSError as error:
            status = repr(error)
        finally:
            health.close()
        took = time.perf_counter() - began
        body = AdviseRequest.of(SCRIPT.encode(), where="idle.sbatch", sbatch_argv=["idle.sbatch"])
        advise, advise_took = _post(socket, body.model_dump_json().encode(), timeout=10)
        print(
            f"another user's {count} idle connections: {held} connected, {still_open} still open "
            f"after 2 s; /health {status} in "
            f"{took * 1000:.0f} ms, /advise {advise} in {advise_took * 1000:.0f} ms"
        )
    finally:
        holder.kill()
        holder.wait()


if __name__ == "__main__":
    sys.exit(main())
