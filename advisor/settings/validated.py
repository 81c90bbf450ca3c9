"""The settings' types and their validation: a bad file names its line, a bad variable names itself."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BeforeValidator, Field, ValidationError, model_validator

from advisor.frozen import Frozen
from advisor.settings import (
    DEFAULT_DAEMON_USER,
    DEFAULT_SOCKET,
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    VARIABLES,
    SettingsError,
    address,
    package_data,
)
from advisor.tomlfile import Problem, TomlFileError, read_toml, validate

Address = Annotated[
    tuple[str, int], BeforeValidator(lambda text: address(text) if isinstance(text, str) else text)
]
"""``HOST:PORT`` as written in the file or a variable, held as the host and the port."""


def _names(value: Any) -> Any:
    """A list as the file writes it, or ``a,b`` as a variable does."""
    return [name.strip() for name in value.split(",") if name.strip()] if isinstance(value, str) else value


_DERIVED = {
    "database": "advisor.db",
    "models_dir": "models",
    "bench_dir": "bench",
    "sandbox_dir": "sandbox",
    "tables_dir": "tables",
}
"""Paths that default to a name inside ``state_dir``."""


class SlurmSettings(Frozen):
    """How the daemon and the admin commands reach Slurm: this host's commands, or a login node's over SSH
    (the daemon then runs on a service host with no Slurm client of its own)."""

    mode: Literal["local", "ssh"] = "local"
    host: str | None = None
    port: Annotated[int, Field(ge=1, le=65535)] = 22
    user: str | None = None
    key: Path | None = None
    """The private key the service user logs in with; no agent and no other key is tried."""
    known_hosts: Path | None = None
    """Only hosts listed here are accepted; without it an unknown host key is trusted on first use."""
    env: dict[str, str] = Field(default_factory=dict)
    """Variables Slurm's commands run with, such as the cluster's ``SLURM_CONF``."""
    timeout_s: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S)] = 30
    """Seconds one Slurm command may take."""

    @model_validator(mode="after")
    def _ssh_needs_a_target(self) -> Self:
        if self.mode == "ssh":
            missing = [name for name in ("host", "user", "key") if getattr(self, name) is None]
            if missing:
                raise ValueError(f"mode 'ssh' needs {', '.join(missing)}")
        return self


class ModelSettings(Frozen):
    """Who retrains the predictors, and when a new version may serve."""

    retrain: Literal["timer", "daemon"] = "timer"
    """The one owner of retraining: the nightly timer's ``advisor models train`` after its benchmarks, or the
    daemon, within minutes of new benchmark rows; the other never retrains."""
    max_worse_mape: Annotated[float, Field(ge=0, le=10)] | None = 0.02
    """A new version is activated only if its held-out MAPE is at most this much (absolute) above the
    active version's; None activates every new version."""


class BenchSettings(Frozen):
    """How the nightly benchmark jobs ask Slurm for their resources: as the site's own jobs would."""

    account: str | None = None
    qos: str | None = None
    reservation: str | None = None
    constraint: str | None = None
    skip_partitions: list[str] = Field(default_factory=list)
    """Partitions never benchmarked (a debug or interactive partition, one the service user may not use)."""
    budget_minutes: Annotated[float, Field(gt=0, le=24 * 60)] = 20.0
    """Measuring time per partition per night: tonight's plan fills it by priority (`bench/night.py`)."""
    cpus_per_job: Annotated[int, Field(ge=1, le=1024)] = 8
    """CPUs per benchmark job (fewer where a partition's nodes have fewer): its data loaders and threads."""
    memory: str | None = None
    """``--mem`` of each job (e.g. ``"32G"``); none: the partition's default."""
    cpu_only: bool = False
    """Measure on the CPU even on GPU partitions: only for a cluster whose GPUs are not real (the sandbox).
    Otherwise a GPU partition whose GPU torch cannot use fails its job instead of timing a CPU."""


class Settings(Frozen):
    state_dir: Path
    """Everything the advisor keeps; the paths below default to names inside it."""
    database: Path
    models_dir: Path
    bench_dir: Path
    """Where ``advisor bench`` writes its results."""
    sandbox_dir: Path
    tables_dir: Path
    """Layer tables of torchvision models, kept between runs (`advisor.introspect.table_cache`)."""
    sandbox_config: Path = package_data("sandbox.toml")
    socket: Path = DEFAULT_SOCKET
    policy: Path = Path("/etc/advisor/policy.toml")
    gpu_specs: Path = package_data("gpu-specs")
    datasets: Path | None = None
    """The site's own datasets table (``advisor/data/datasets.toml``'s shape), over the shipped one: how a
    training command's data path becomes samples per epoch, classes and input side."""
    timeout_s: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S)] = DEFAULT_TIMEOUT_S
    """Seconds a caller (``advise-submit``, ``advisor status``, ``advisor explain``) waits for the daemon's
    whole answer; past it advise-submit submits the job unchanged."""
    daemon_user: str = DEFAULT_DAEMON_USER
    """Who may serve the socket besides root and the caller."""
    allow_root: bool = False
    """Lets the daemon run as root: for test suites that run as root, never on a cluster."""
    preload_model_libraries: bool = True
    """The daemon loads transformers and timm in the background at its start (torch and torchvision whatever
    this says), so that the first ``hf:`` or ``timm:`` job does not wait for them; false keeps their memory
    (about 50 MiB) for a site whose users run neither, the first such job loading them instead."""
    admins: Annotated[list[str], BeforeValidator(_names)] = Field(default_factory=list)
    """User names (or numeric uids) the daemon shows the admin view (``advisor web``'s admin page): model
    accuracy, benchmark coverage, the queue and the savings of every user's advised jobs. Nobody else, root
    included, unless named."""
    slurm: SlurmSettings = SlurmSettings()
    models: ModelSettings = ModelSettings()
    service: Address | None = None
    """``HOST:PORT`` of the cluster-wide service: advise-submit, ``advisor status`` and ``explain`` call it
    over TCP with a MUNGE credential instead of the local socket."""
    service_listen: Address | None = None
    """``HOST:PORT`` where the daemon serves the whole cluster (besides its socket); callers are identified
    by their MUNGE credentials."""
    munge_socket: Path | None = None
    """munged's socket, where it is not MUNGE's default (``/run/munge/munge.socket.2``)."""
    metrics_listen: Address | None = None
    """``HOST:PORT`` where the daemon also serves ``/metrics`` (and ``/health``) over TCP for Prometheus,
    e.g. ``127.0.0.1:9377``; none: only on the socket."""
    bench: BenchSettings = BenchSettings()

    @model_validator(mode="before")
    @classmethod
    def _paths_inside_the_state_dir(cls, data: Any) -> Any:
        if isinstance(data, dict) and "state_dir" in data:
            state = Path(data["state_dir"])
            data = {name: state / leaf for name, leaf in _DERIVED.items()} | data
        return data


class SettingsFileError(SettingsError, TomlFileError):
    """Settings that cannot be used: one ``FILE:LINE: key: what is wrong`` (or variable) per problem."""


def load(environ: Mapping[str, str], path: Path | None) -> Settings:
    """The settings of a process started with ``environ``, from the file at ``path`` if any."""
    text, data = read_toml(path, SettingsFileError) if path is not None else ("", {})
    data = {"state_dir": _xdg_state(environ)} | data | _overrides(environ)
    if environ.get("SLURM_CONF"):
        # The one Slurm variable a shell passes on: the cluster its own commands reach; the file's wins.
        slurm = dict(data.get("slurm") or {})
        slurm["env"] = {"SLURM_CONF": environ["SLURM_CONF"]} | dict(slurm.get("env") or {})
        data["slurm"] = slurm
    return validate(Settings, data, text, str(path or "built-in settings"), SettingsFileError)


def _overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """The variables that are set, each checked alone so that a bad one is named as the culprit."""
    found: dict[str, Any] = {}
    for variable, key in VARIABLES.items():
        value = environ.get(variable, "").strip()
        if not value:
            continue
        try:
            Settings.model_validate({"state_dir": "/", key: value})
        except ValidationError as error:
            reasons = "; ".join(detail["msg"] for detail in error.errors())
            problem = Problem(line=None, key=variable, message=f"{value!r}: {reasons}")
            raise SettingsFileError("environment", [problem]) from None
        found[key] = value
    return found


def _xdg_state(environ: Mapping[str, str]) -> Path:
    """The XDG state folder of the user running the command."""
    xdg = environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path(environ.get("HOME") or Path.home()) / ".local" / "state"
    return base / "advisor"
