"""Pure rendering of the sandbox's configuration files from its description and folder layout."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from advisor.sandbox.spec import SandboxSpec


@dataclass(frozen=True)
class Layout:
    """Where everything of one sandbox lives: all state is under `root`, nothing elsewhere."""

    root: Path

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def run(self) -> Path:
        """Sockets and pid files; munged insists that everyone may traverse the socket's folder."""
        return self.root / "run"

    @property
    def secrets(self) -> Path:
        return self.root / "secrets"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def dev(self) -> Path:
        """Empty placeholder files that stand in for GPU device files in gres.conf."""
        return self.root / "dev"

    @property
    def db(self) -> Path:
        return self.root / "db"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.run / "munge.socket"

    @property
    def munge_key(self) -> Path:
        return self.secrets / "munge.key"

    @property
    def mysql_socket(self) -> Path:
        return self.run / "mysql.sock"

    @property
    def record(self) -> Path:
        """What `up` started (pids, ports), read by `status` and `down`."""
        return self.run / "sandbox.json"

    def folders(self) -> list[Path]:
        return [self.etc, self.run, self.secrets, self.log, self.state, self.spool, self.dev, self.db]


@dataclass(frozen=True)
class Identity:
    """Who runs the daemons and on which host; Slurm checks both against its configuration."""

    user: str
    hostname: str


def gpu_files(spec: SandboxSpec, layout: Layout) -> dict[str, list[Path]]:
    """Placeholder device files per node, one per declared GPU."""
    return {
        node: [layout.dev / f"{node}-gpu{index}" for index in range(part.gpus_per_node)]
        for part in spec.partition
        for node in part.node_names()
        if part.gpus_per_node
    }


def render_slurm_conf(spec: SandboxSpec, layout: Layout, identity: Identity) -> str:
    ports = spec.slurmd_ports()
    lines = [
        "# Written by `advisor sandbox up`; edit the sandbox description instead.",
        f"ClusterName={spec.name}",
        f"SlurmctldHost={identity.hostname}(127.0.0.1)",
        f"SlurmctldPort={spec.slurmctld_port}",
        f"SlurmUser={identity.user}",
        f"SlurmdUser={identity.user}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={layout.munge_socket}",
        f"StateSaveLocation={layout.state}",
        f"SlurmdSpoolDir={layout.spool}/slurmd-%n",
        f"SlurmctldPidFile={layout.run}/slurmctld.pid",
        f"SlurmdPidFile={layout.run}/slurmd-%n.pid",
        f"SlurmctldLogFile={layout.log}/slurmctld.log",
        f"SlurmdLogFile={layout.log}/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "SchedulerType=sched/backfill",
        f"SchedulerParameters={spec.scheduler.parameters()}",
        # Nodes declare more CPUs, memory and GPUs than this host has: trust the configuration.
        "SlurmdParameters=config_overrides",
        "GresTypes=gpu",
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=127.0.0.1",
        f"AccountingStoragePort={spec.slurmdbd_port}",
        # For slurmdbd connections this names the munge socket, not a password.
        f"AccountingStoragePass={layout.munge_socket}",
        "AccountingStorageTRES=gres/gpu",
        "JobCompType=jobcomp/none",
        "JobAcctGatherType=jobacct_gather/none",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        f"MinJobAge={spec.scheduler.min_job_age_s}",
        "KillWait=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "DebugFlags=NO_CONF_HASH",
    ]
    for part in spec.partition:
        gres = f" Gres=gpu:{part.gpu_type}:{part.gpus_per_node}" if part.gpu_type else ""
        for node in part.node_names():
            lines.append(
                f"NodeName={node} NodeHostname={identity.hostname} NodeAddr=127.0.0.1 Port={ports[node]}"
                f" CPUs={part.cpus_per_node} RealMemory={part.memory_mb}{gres} State=UNKNOWN"
            )
    default = spec.default_partition()
    for part in spec.partition:
        lines.append(
            f"PartitionName={part.name} Nodes={','.join(part.node_names())}"
            f" Default={'YES' if part.name == default else 'NO'} MaxTime={part.max_time} State=UP"
        )
    if spec.cli_filter:
        lines.append("CliFilterPlugins=cli_filter/lua")
    return "\n".join(lines) + "\n"


def render_gres_conf(spec: SandboxSpec, layout: Layout) -> str:
    lines = ["# Written by `advisor sandbox up`.", "AutoDetect=off"]
    types = {node: part.gpu_type for part in spec.partition for node in part.node_names()}
    for node, files in gpu_files(spec, layout).items():
        lines.extend(f"NodeName={node} Name=gpu Type={types[node]} File={path}" for path in files)
    return "\n".join(lines) + "\n"


def render_slurmdbd_conf(spec: SandboxSpec, layout: Layout, identity: Identity, db_password: str) -> str:
    lines = [
        "# Written by `advisor sandbox up`.",
        "AuthType=auth/munge",
        f"AuthInfo=socket={layout.munge_socket}",
        "DbdHost=localhost",
        "DbdAddr=127.0.0.1",
        f"DbdPort={spec.slurmdbd_port}",
        f"SlurmUser={identity.user}",
        f"LogFile={layout.log}/slurmdbd.log",
        f"PidFile={layout.run}/slurmdbd.pid",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        f"StoragePort={spec.mariadb_port}",
        "StorageUser=slurm",
        f"StoragePass={db_password}",
        "StorageLoc=slurm_acct_db",
    ]
    return "\n".join(lines) + "\n"
