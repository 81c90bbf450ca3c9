"""sbatch 22.05's option and environment tables, as probed from sbatch 22.05.8 itself.

Order matters: getopt_long lists ambiguous abbreviations in table order, and messages must match.
``--tres-per-task`` and friends do not exist in 22.05 (sbatch answers "unrecognized option").
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple


class Arg(Enum):
    NONE = "none"
    REQUIRED = "required"
    OPTIONAL = "optional"


class OptionSpec(NamedTuple):
    """One sbatch option: its argument and short form.
    (A NamedTuple, as every record on plain sbatch's cli_filter path: a dataclass loads `inspect`, 7 ms.)"""

    name: str
    arg: Arg
    short: str | None = None
    #: Aliases carry their canonical name; getopt treats same-canonical entries as one option.
    canonical: str = ""

    @property
    def key(self) -> str:
        return self.canonical or self.name


_N, _R, _O = Arg.NONE, Arg.REQUIRED, Arg.OPTIONAL

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("account", _R, "A"),
    OptionSpec("acctg-freq", _R),
    OptionSpec("array", _R, "a"),
    OptionSpec("batch", _R),
    OptionSpec("begin", _R, "b"),
    OptionSpec("bb", _R),
    OptionSpec("bbf", _R),
    OptionSpec("cluster-constraint", _R),
    OptionSpec("chdir", _R, "D"),
    OptionSpec("cluster", _R, canonical="clusters"),
    OptionSpec("clusters", _R, "M"),
    OptionSpec("comment", _R),
    OptionSpec("container", _R),
    OptionSpec("context", _R),
    OptionSpec("contiguous", _N),
    OptionSpec("constraint", _R, "C"),
    OptionSpec("core-spec", _R, "S"),
    OptionSpec("cores-per-socket", _R),
    OptionSpec("cpu-freq", _R),
    OptionSpec("cpus-per-gpu", _R),
    OptionSpec("cpus-per-task", _R, "c"),
    OptionSpec("deadline", _R),
    OptionSpec("delay-boot", _R),
    OptionSpec("dependency", _R, "d"),
    OptionSpec("distribution", _R, "m"),
    OptionSpec("error", _R, "e"),
    OptionSpec("exclude", _R, "x"),
    OptionSpec("exclusive", _O),
    OptionSpec("export", _R),
    OptionSpec("export-file", _R),
    OptionSpec("extra-node-info", _R, "B"),
    OptionSpec("get-user-env", _O),
    OptionSpec("gid", _R),
    OptionSpec("gpu-bind", _R),
    OptionSpec("gpu-freq", _R),
    OptionSpec("gpus", _R, "G"),
    OptionSpec("gpus-per-node", _R),
    OptionSpec("gpus-per-socket", _R),
    OptionSpec("gpus-per-task", _R),
    OptionSpec("gres", _R),
    OptionSpec("gres-flags", _R),
    OptionSpec("help", _N, "h"),
    OptionSpec("hint", _R),
    OptionSpec("hold", _N, "H"),
    OptionSpec("ignore-pbs", _N),
    OptionSpec("input", _R, "i"),
    OptionSpec("job-name", _R, "J"),
    OptionSpec("kill-on-invalid-dep", _R),
    OptionSpec("licenses", _R, "L"),
    OptionSpec("mail-type", _R),
    OptionSpec("mail-user", _R),
    OptionSpec("mcs-label", _R),
    OptionSpec("mem", _R),
    OptionSpec("mem-bind", _R),
    OptionSpec("mem-per-cpu", _R),
    OptionSpec("mem-per-gpu", _R),
    OptionSpec("mincpus", _R),
    OptionSpec("network", _R),
    OptionSpec("nice", _O),
    OptionSpec("no-kill", _O, "k"),
    OptionSpec("no-requeue", _N),
    OptionSpec("nodefile", _R, "F"),
    OptionSpec("nodelist", _R, "w"),
    OptionSpec("nodes", _R, "N"),
    OptionSpec("ntasks", _R, "n"),
    OptionSpec("ntasks-per-core", _R),
    OptionSpec("ntasks-per-gpu", _R),
    OptionSpec("ntasks-per-node", _R),
    OptionSpec("ntasks-per-socket", _R),
    OptionSpec("ntasks-per-tres", _R),
    OptionSpec("open-mode", _R),
    OptionSpec("output", _R, "o"),
    OptionSpec("overcommit", _N, "O"),
    OptionSpec("oversubscribe", _N, "s"),
    OptionSpec("parsable", _N),
    OptionSpec("partition", _R, "p"),
    OptionSpec("power", _R),
    OptionSpec("prefer", _R),
    OptionSpec("priority", _R),
    OptionSpec("profile", _R),
    OptionSpec("propagate", _O),
    OptionSpec("qos", _R, "q"),
    OptionSpec("quiet", _N, "Q"),
    OptionSpec("reboot", _N),
    OptionSpec("requeue", _N),
    OptionSpec("reservation", _R),
    OptionSpec("signal", _R),
    OptionSpec("sockets-per-node", _R),
    OptionSpec("spread-job", _N),
    OptionSpec("switches", _R),
    OptionSpec("tasks-per-node", _R, canonical="ntasks-per-node"),
    OptionSpec("test-only", _N),
    OptionSpec("thread-spec", _R),
    OptionSpec("threads-per-core", _R),
    OptionSpec("time", _R, "t"),
    OptionSpec("time-min", _R),
    OptionSpec("tmp", _R),
    OptionSpec("uid", _R),
    OptionSpec("use-min-nodes", _N),
    OptionSpec("usage", _N),
    OptionSpec("verbose", _N, "v"),
    OptionSpec("version", _N, "V"),
    OptionSpec("wait", _N, "W"),
    OptionSpec("wait-all-nodes", _R),
    OptionSpec("wckey", _R),
    OptionSpec("wrap", _R),
)

BY_NAME = {spec.name: spec for spec in OPTIONS}
BY_SHORT = {spec.short: spec for spec in OPTIONS if spec.short}

#: sbatch's env_vars table in its order (a later variable for the same option wins). SBATCH_WAIT4SWITCH
#: is left out: it sets a value no option can express.
ENVIRONMENT: tuple[tuple[str, str], ...] = (
    ("SBATCH_ACCOUNT", "account"),
    ("SBATCH_ARRAY_INX", "array"),
    ("SBATCH_ACCTG_FREQ", "acctg-freq"),
    ("SBATCH_BATCH", "batch"),
    ("SBATCH_BURST_BUFFER", "bb"),
    ("SBATCH_CLUSTER_CONSTRAINT", "cluster-constraint"),
    ("SBATCH_CLUSTERS", "clusters"),
    ("SLURM_CLUSTERS", "clusters"),
    ("SBATCH_CONTAINER", "container"),
    ("SBATCH_CONSTRAINT", "constraint"),
    ("SBATCH_CORE_SPEC", "core-spec"),
    ("SBATCH_CPU_FREQ_REQ", "cpu-freq"),
    ("SBATCH_CPUS_PER_GPU", "cpus-per-gpu"),
    ("SBATCH_DEBUG", "verbose"),
    ("SBATCH_DELAY_BOOT", "delay-boot"),
    ("SBATCH_DISTRIBUTION", "distribution"),
    ("SBATCH_EXCLUSIVE", "exclusive"),
    ("SBATCH_EXPORT", "export"),
    ("SBATCH_GET_USER_ENV", "get-user-env"),
    ("SBATCH_GRES", "gres"),
    ("SBATCH_GRES_FLAGS", "gres-flags"),
    ("SBATCH_GPUS", "gpus"),
    ("SBATCH_GPU_BIND", "gpu-bind"),
    ("SBATCH_GPU_FREQ", "gpu-freq"),
    ("SBATCH_GPUS_PER_NODE", "gpus-per-node"),
    ("SBATCH_GPUS_PER_SOCKET", "gpus-per-socket"),
    ("SBATCH_GPUS_PER_TASK", "gpus-per-task"),
    ("SLURM_HINT", "hint"),
    ("SBATCH_HINT", "hint"),
    ("SBATCH_JOB_NAME", "job-name"),
    ("SBATCH_MEM_PER_CPU", "mem-per-cpu"),
    ("SBATCH_MEM_PER_GPU", "mem-per-gpu"),
    ("SBATCH_MEM_PER_NODE", "mem"),
    ("SBATCH_NETWORK", "network"),
    ("SBATCH_NO_KILL", "no-kill"),
    ("SBATCH_NO_REQUEUE", "no-requeue"),
    ("SBATCH_OPEN_MODE", "open-mode"),
    ("SBATCH_OVERCOMMIT", "overcommit"),
    ("SBATCH_PARTITION", "partition"),
    ("SBATCH_POWER", "power"),
    ("SBATCH_PROFILE", "profile"),
    ("SBATCH_QOS", "qos"),
    ("SBATCH_REQ_SWITCH", "switches"),
    ("SBATCH_REQUEUE", "requeue"),
    ("SBATCH_RESERVATION", "reservation"),
    ("SBATCH_SIGNAL", "signal"),
    ("SBATCH_SPREAD_JOB", "spread-job"),
    ("SBATCH_THREAD_SPEC", "thread-spec"),
    ("SBATCH_THREADS_PER_CORE", "threads-per-core"),
    ("SBATCH_TIMELIMIT", "time"),
    ("SBATCH_USE_MIN_NODES", "use-min-nodes"),
    ("SBATCH_WAIT", "wait"),
    ("SBATCH_WAIT_ALL_NODES", "wait-all-nodes"),
    ("SBATCH_WCKEY", "wckey"),
    ("SBATCH_ERROR", "error"),
    ("SBATCH_INPUT", "input"),
    ("SBATCH_OUTPUT", "output"),
    ("SBATCH_IGNORE_PBS", "ignore-pbs"),
)
