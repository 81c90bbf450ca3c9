"""Bringing the sandbox cluster up and down: munged, MariaDB, slurmdbd, slurmctld and one slurmd per node."""

from __future__ import annotations

import getpass
import os
import secrets
import socket
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from advisor.cli_filter import install
from advisor.sandbox import processes, speed
from advisor.sandbox.preflight import busy_ports, missing_packages, port_open
from advisor.sandbox.render import (
    Identity,
    Layout,
    gpu_files,
    render_gres_conf,
    render_slurm_conf,
    render_slurmdbd_conf,
)
from advisor.sandbox.spec import SandboxSpec
from advisor.sandbox.speed import SpeedControl
from advisor.settings import DEFAULT_TIMEOUT_S
from advisor.slurm.client import SlurmClient
from advisor.slurm.models import Partition
from advisor.slurm.runner import LocalRunner, SlurmError

_SERVING = frozenset({"IDLE", "MIXED", "ALLOCATED"})
_UNSERVING_FLAGS = frozenset({"DRAIN", "DRAINING", "DRAINED", "NOT_RESPONDING", "FAIL", "POWERED_DOWN"})


class SandboxError(RuntimeError):
    """The sandbox could not be brought up or down; the message carries the relevant log tail."""


class SandboxRecord(BaseModel):
    """What `up` started, in start order, so that `down` stops exactly those processes."""

    pids: dict[str, int] = {}
    notes: list[str] = []
    """What start-up could not apply (a node's quota the kernel refused, one that cannot mean its speed)."""
    slurm_conf: str = ""


class DaemonState(BaseModel):
    name: str
    pid: int
    running: bool


class SandboxStatus(BaseModel):
    root: Path
    daemons: list[DaemonState]
    partitions: list[Partition]
    notes: list[str] = []
    """What the sandbox could not do as described (nodes that run at full speed, and why)."""

    @property
    def running(self) -> bool:
        return bool(self.daemons) and all(d.running for d in self.daemons)


class Sandbox:
    """One sandbox cluster: its description, its folder, and the user and host it runs as."""

    def __init__(self, spec: SandboxSpec, root: Path, identity: Identity | None = None) -> None:
        self.spec = spec
        self.layout = Layout(root.resolve())
        self.identity = identity or Identity(user=getpass.getuser(), hostname=socket.gethostname())
        self.runner = LocalRunner(env=self.client_env())
        self.client = SlurmClient(self.runner, timeout_s=15)
        self.speed_control = SpeedControl.detect()

    def client_env(self) -> dict[str, str]:
        """What a Slurm command needs in its environment to talk to this cluster."""
        return {"SLURM_CONF": str(self.layout.slurm_conf)}

    def up(self, timeout_s: float = 120.0) -> SandboxStatus:
        """Start whatever is not running and wait until every node serves; harmless when already up."""
        _check_tools()
        record = self._read_record()
        slurm_conf = render_slurm_conf(self.spec, self.layout, self.identity)
        alive = {name: pid for name, pid in record.pids.items() if processes.is_ours(pid, self.layout.root)}
        if alive and len(alive) == len(record.pids):
            if record.slurm_conf != slurm_conf:
                raise SandboxError(
                    f"a sandbox with another configuration already runs in {self.layout.root}; "
                    "run `advisor sandbox down` first"
                )
            self._wait_for_nodes(time.monotonic() + timeout_s)
            return self.status()
        if alive:
            processes.stop(list(alive.values()), self.layout.root)
        try:
            self._start(slurm_conf, time.monotonic() + timeout_s)
        except (SandboxError, SlurmError) as exc:
            self.down()
            raise SandboxError(str(exc)) from exc
        return self.status()

    def down(self) -> list[str]:
        """Cancel the sandbox's jobs, then stop its daemons and any stray process that carries its marker."""
        record = self._read_record()
        if record.pids.get("slurmctld") and processes.is_ours(record.pids["slurmctld"], self.layout.root):
            self._cancel_all_jobs()
        stopped = [name for name, pid in record.pids.items() if processes.is_ours(pid, self.layout.root)]
        processes.stop(list(reversed(record.pids.values())), self.layout.root)
        processes.stop(processes.marked_pids(self.layout.root), self.layout.root, grace_s=2.0)
        for node in self.spec.node_names():
            group = self.speed_control.path(self.layout.root, node)
            if group is not None and group.exists():
                speed.remove(group)
        if self.layout.record.exists():
            self.layout.record.unlink()
        return stopped

    def status(self) -> SandboxStatus:
        record = self._read_record()
        daemons = [
            DaemonState(name=name, pid=pid, running=processes.is_ours(pid, self.layout.root))
            for name, pid in record.pids.items()
        ]
        controller_up = any(d.name == "slurmctld" and d.running for d in daemons)
        partitions = self.client.partitions() if controller_up else []
        notes = [*self._speed_notes(), *record.notes]
        return SandboxStatus(root=self.layout.root, daemons=daemons, partitions=partitions, notes=notes)

    def _start(self, slurm_conf: str, deadline: float) -> None:
        self._check_ports_free()
        self._prepare_files(slurm_conf)
        record = SandboxRecord(slurm_conf=slurm_conf)
        layout = self.layout
        self._spawn(
            record,
            "munged",
            [
                "munged",
                "--foreground",
                # The sandbox folder may sit below private folders (a test's tmp dir): warn, don't refuse.
                "--force",
                f"--key-file={layout.munge_key}",
                f"--socket={layout.munge_socket}",
                f"--pid-file={layout.run}/munged.pid",
                f"--log-file={layout.log}/munged.log",
                f"--seed-file={layout.secrets}/munged.seed",
            ],
            ready=layout.munge_socket.exists,
            deadline=deadline,
        )
        self._start_database(record, deadline)
        self._spawn(
            record,
            "slurmdbd",
            ["slurmdbd", "-D"],
            ready=lambda: port_open(self.spec.slurmdbd_port),
            deadline=deadline,
        )
        self._register_cluster()
        self._spawn(
            record,
            "slurmctld",
            ["slurmctld", "-D", "-f", str(layout.slurm_conf)],
            ready=lambda: port_open(self.spec.slurmctld_port),
            deadline=deadline,
        )
        for node, port in self.spec.slurmd_ports().items():
            group = self._speed_group(node, record)
            self._spawn(
                record,
                f"slurmd-{node}",
                ["slurmd", "-D", "-f", str(layout.slurm_conf), "-N", node],
                ready=lambda port=port: port_open(port),  # type: ignore[misc]
                deadline=deadline,
                preexec=None if group is None else lambda group=group: speed.join(group),  # type: ignore[misc]
            )
        self._wait_for_nodes(deadline)

    def _speed_group(self, node: str, record: SandboxRecord) -> Path | None:
        """The CPU cgroup a slow node's slurmd runs in; what cannot be applied is noted in ``record``."""
        part = next(p for p in self.spec.partition if node in p.node_names())
        if part.speed >= 1:
            return None
        group, notes = self.speed_control.slow_group(self.layout.root, node, part.speed, part.cpus_per_node)
        record.notes.extend(notes)
        return group

    def _speed_notes(self) -> list[str]:
        slow = [p.name for p in self.spec.partition if p.speed < 1]
        missing = self.speed_control.missing
        if not slow or missing is None:
            return []
        return [f"partitions {', '.join(slow)} run at full speed: {missing}"]

    def _start_database(self, record: SandboxRecord, deadline: float) -> None:
        """MariaDB for slurmdbd: created on first start, kept under the sandbox folder afterwards."""
        layout = self.layout
        datadir = layout.db / "data"
        # Its own temporary folder: MariaDB names temporary tables by pid, which collide in a shared /tmp
        # when sandboxes start side by side (seen as "Unknown table 'mysql.tmp_proxies_priv'").
        tmpdir = layout.db / "tmp"
        tmpdir.mkdir(exist_ok=True)
        running_as_root = os.geteuid() == 0
        if not (datadir / "mysql").exists():
            self._command(
                [
                    "mariadb-install-db",
                    "--no-defaults",
                    f"--datadir={datadir}",
                    f"--tmpdir={tmpdir}",
                    f"--auth-root-socket-user={self.identity.user}",
                    "--skip-test-db",
                    *(["--user=root"] if running_as_root else []),
                ],
                timeout_s=60,
            )
        self._spawn(
            record,
            "mariadbd",
            [
                "mariadbd",
                "--no-defaults",
                f"--datadir={datadir}",
                f"--tmpdir={tmpdir}",
                f"--socket={layout.mysql_socket}",
                f"--pid-file={layout.run}/mariadbd.pid",
                f"--port={self.spec.mariadb_port}",
                "--bind-address=127.0.0.1",
                f"--log-error={layout.log}/mariadbd.log",
                "--innodb-buffer-pool-size=32M",
                *(["--user=root"] if running_as_root else []),
            ],
            ready=lambda: port_open(self.spec.mariadb_port),
            deadline=deadline,
        )
        password = (layout.secrets / "db-password").read_text().strip()
        sql = (
            "CREATE DATABASE IF NOT EXISTS slurm_acct_db;"
            f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}';"
            f"ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}';"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
        )
        # install-db lets the sandbox's own user in through the socket; SQL on stdin keeps the password
        # out of argv and out of error messages.
        self._command(
            ["mariadb", "--no-defaults", f"--socket={layout.mysql_socket}", "-u", self.identity.user],
            stdin=sql,
            timeout_s=30,
        )

    def _register_cluster(self) -> None:
        """slurmctld only keeps accounting for a cluster that slurmdbd already knows."""
        known = self._command(["sacctmgr", "-n", "-P", "list", "cluster", "format=cluster"], timeout_s=30)
        if self.spec.name not in known.split():
            self._command(["sacctmgr", "-i", "add", "cluster", self.spec.name], timeout_s=30)

    def _prepare_files(self, slurm_conf: str) -> None:
        layout = self.layout
        for folder in layout.folders():
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(0o700 if folder == layout.secrets else 0o755)
        for node in self.spec.node_names():
            (layout.spool / f"slurmd-{node}").mkdir(exist_ok=True)
        if not layout.munge_key.exists():
            layout.munge_key.write_bytes(secrets.token_bytes(1024))
            layout.munge_key.chmod(0o400)
        password_file = layout.secrets / "db-password"
        if not password_file.exists():
            password_file.write_text(secrets.token_hex(16))
            password_file.chmod(0o600)
        for files in gpu_files(self.spec, layout).values():
            for path in files:
                path.touch()
        layout.slurm_conf.write_text(slurm_conf)
        lua = layout.etc / "cli_filter.lua"
        if self.spec.cli_filter:
            install(layout.etc, None, DEFAULT_TIMEOUT_S)  # the advisor's own helper, started bare
        else:
            lua.unlink(missing_ok=True)
        (layout.etc / "gres.conf").write_text(render_gres_conf(self.spec, layout))
        dbd_conf = layout.etc / "slurmdbd.conf"
        dbd_conf.touch(mode=0o600)
        dbd_conf.chmod(0o600)
        dbd_conf.write_text(
            render_slurmdbd_conf(self.spec, layout, self.identity, password_file.read_text().strip())
        )

    def _spawn(
        self,
        record: SandboxRecord,
        name: str,
        argv: list[str],
        *,
        ready: Callable[[], bool],
        deadline: float,
        preexec: Callable[[], None] | None = None,
    ) -> None:
        log = self.layout.log / f"{name}.out"
        env = self.client_env()
        process = processes.spawn(argv, root=self.layout.root, log=log, env=env, preexec=preexec)
        record.pids[name] = process.pid
        self.layout.record.write_text(record.model_dump_json(indent=2))
        while not ready():
            if process.poll() is not None:
                raise SandboxError(f"{name} exited during start-up; {self._log_tails(name)}")
            if time.monotonic() > deadline:
                raise SandboxError(f"{name} did not become ready in time; {self._log_tails(name)}")
            time.sleep(0.1)

    def _wait_for_nodes(self, deadline: float) -> None:
        """Every node registered and schedulable; after a restart some may still run earlier jobs."""
        expected = set(self.spec.node_names())
        while True:
            try:
                nodes = self.client.nodes()
            except SlurmError:
                nodes = []
            ready = {n.name for n in nodes if n.state in _SERVING and not set(n.flags) & _UNSERVING_FLAGS}
            if expected <= ready:
                return
            if time.monotonic() > deadline:
                states = ", ".join(f"{n.name}={n.state}" for n in nodes) or "no answer from slurmctld"
                raise SandboxError(f"nodes not ready in time ({states}); {self._log_tails('slurmctld')}")
            time.sleep(0.5)

    def _cancel_all_jobs(self) -> None:
        try:
            jobs = self.client.jobs()
            for job in jobs:
                self.client.cancel(job.job_id)
        except SlurmError:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if not any(j.state in {"RUNNING", "COMPLETING"} for j in self.client.jobs()):
                    return
            except SlurmError:
                return
            time.sleep(0.2)

    def _check_ports_free(self) -> None:
        ports = {
            "slurmctld": self.spec.slurmctld_port,
            "slurmdbd": self.spec.slurmdbd_port,
            "mariadbd": self.spec.mariadb_port,
            **{f"slurmd-{node}": port for node, port in self.spec.slurmd_ports().items()},
        }
        if busy := busy_ports(ports):
            raise SandboxError(
                f"ports already in use on 127.0.0.1: {', '.join(busy)}; choose another base_port"
            )

    def _command(self, argv: list[str], *, timeout_s: float, stdin: str | None = None) -> str:
        result = self.runner.run(argv, stdin=stdin, timeout=timeout_s)
        if result.returncode != 0:
            raise SlurmError(
                argv, "failed", returncode=result.returncode, stdout=result.stdout, stderr=result.stderr
            )
        return result.stdout

    def _log_tails(self, name: str, lines: int = 15) -> str:
        stem = name.removeprefix("slurmd-")
        logs = sorted(self.layout.log.glob(f"*{stem}*"))
        tails = []
        for log in logs:
            text = log.read_text(errors="replace").splitlines()[-lines:]
            tails.append(f"--- {log} ---\n" + "\n".join(text))
        return "\n".join(tails) or f"no logs in {self.layout.log}"

    def _read_record(self) -> SandboxRecord:
        if not self.layout.record.exists():
            return SandboxRecord()
        return SandboxRecord.model_validate_json(self.layout.record.read_text())


def _check_tools() -> None:
    if missing := missing_packages():
        raise SandboxError(
            f"missing programs; install Debian's {' '.join(missing)} (the README's set-up command does)"
        )
