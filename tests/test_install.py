"""The admin guide's install, followed line by line in a temporary root: the wheel built from the tree, the
service host's venv and `advisor init-site`, `systemd-analyze verify` on the units it wrote (naming the
installed `advisor`), and the login nodes' base install, which runs every user command, `recommend`
through a running daemon (on the sandbox) among them.

Each line of the guide's block is one step this file knows how to follow; a line it does not know fails
the test, so the guide cannot gain a step nobody ran. Two kinds are not run, because they change the host
itself: `useradd` and `systemctl`. Paths are taken under the root; pip installs the wheel without
fetching anything (`--no-deps`), and the packages come from this venv: only pydantic, rich and what they
need for the base install (the service's are then not importable), everything for `[service]`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pytest

from advisor.sandbox.cluster import Sandbox
from advisor.site.layout import CONFIG_DIR, UNIT_DIR, UNITS, PrefixError, checked_prefix, site_files
from tests.daemon_support import SCRIPT, Daemon, started_daemon
from tests.test_systemd_units import HOST_UNIT_DIRS, exposure, verify

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "admin-guide.md"
EXAMPLES = REPO / "examples"
POLICY = "policies/default.toml"
NOT_RUN = ("useradd", "systemctl")
"""Steps that change the host itself (a system user, running services): read, not run."""


def guide_steps() -> list[list[str]]:
    """The command lines of the guide's "Installing" block, comments and blank lines left out."""
    section = GUIDE.read_text().split("\n## Installing\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    lines = block.replace("\\\n", " ").splitlines()
    return [shlex.split(line, comments=True) for line in lines if line.strip() and not line.startswith("#")]


@dataclass
class Install:
    """What following the guide left: the root, the wheel, and each step's outcome by its first words."""

    root: Path
    wheel: Path
    outcomes: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    not_run: list[str] = field(default_factory=list)

    def under(self, path: str) -> Path:
        return self.root / path.lstrip("/")


def build_wheel(folder: Path) -> Path:
    """`pip wheel .` on a copy of the tree (the links in advisor/site/files/ kept as links, as in git)."""
    tree = folder / "tree"
    shutil.copytree(
        REPO / "advisor", tree / "advisor", symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("policies", "systemd"):
        shutil.copytree(REPO / name, tree / name)
    for name in ("pyproject.toml", "README.md", "etc/advisor.toml", "requirements/constraints.txt"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tree / name)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w"]
    subprocess.run([*build, str(folder), str(tree)], cwd=tree, check=True, capture_output=True, timeout=300)
    (built,) = folder.glob("advisor-*.whl")
    return built


def base_dependencies(root: Path) -> Path:
    """This venv's copies of pydantic, rich and what they require (not their extras), as one folder of
    links: the base install's packages and nothing of the service's."""
    folder = root / "base-site"
    if folder.is_dir():
        return folder
    folder.mkdir()
    pending = list(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])
    seen: set[str] = set()
    while pending:
        name = re.split(r"[<>=!~ ;\[]", pending.pop())[0].lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        dist = metadata.distribution(name)
        pending += [need for need in dist.requires or [] if "extra ==" not in need]
        for file in dist.files or []:
            top = Path(str(file)).parts[0]
            if not top.endswith(".pth") and not (folder / top).exists():
                (folder / top).symlink_to(Path(str(dist.locate_file(top))))
    return folder


def _site_packages(python: Path) -> Path:
    where = [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    return Path(subprocess.run(where, capture_output=True, text=True, check=True).stdout.strip())


def _pip_install(install: Install, argv: list[str]) -> None:
    """`ENV/bin/pip install [-c FILE] WHEEL[extra]`: the wheel the guide names, the packages from here."""
    words = argv[2:]
    constraints = words[words.index("-c") + 1] if "-c" in words else None
    (wanted,) = [word for word in words if word.endswith((".whl", "]"))]
    assert wanted.split("[")[0] == install.wheel.name, "the guide names the wheel this version builds"
    if constraints is not None:
        assert install.under(constraints).read_text() == (REPO / "requirements/constraints.txt").read_text()
    python = install.under(argv[0]).parent / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q"]
    subprocess.run([*pip, str(install.wheel)], check=True, capture_output=True, timeout=300)
    site = _site_packages(python)
    if wanted.endswith("[service]"):
        (site / "service.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n")
    else:
        (site / "base.pth").write_text(f"{base_dependencies(install.root.parent)}\n")


def _advisor(install: Install, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """An installed `advisor`; `init-site /` writes under the root, for the venv as the host will see it."""
    words = [install.under(word) if word.startswith("/etc/") else word for word in argv[1:]]
    if words[:2] == ["init-site", "/"]:
        words = ["init-site", str(install.root), "--prefix", str(Path(argv[0]).parent.parent)]
    command = [str(install.under(argv[0])), *map(str, words)]
    return subprocess.run(command, env=_env(install), capture_output=True, text=True, timeout=120)


def _env(install: Install) -> dict[str, str]:
    # No SLURM_CONF: `policy check` asks the host's Slurm (none here: it says so at once).
    skip = ("ADVISOR_", "PYTHON", "SLURM_CONF")
    env = {key: value for key, value in os.environ.items() if not key.startswith(skip)}
    return env | {"ADVISOR_SOCKET": str(install.root / "no-daemon.sock")}


def _verify(install: Install, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`systemd-analyze verify` of the written units, in the root beside the host's own units."""
    assert all(path.startswith(f"{UNIT_DIR}/") for path in argv[2:]), argv
    host_units = next(d for d in HOST_UNIT_DIRS if (d / "sysinit.target").is_file())
    if not install.under("/usr/lib/systemd/system").exists():
        shutil.copytree(host_units, install.under("/usr/lib/systemd/system"), symlinks=True)
        install.under("/bin").mkdir(exist_ok=True)
        shutil.copy2("/bin/kill", install.under("/bin/kill"))  # advisor.service's ExecReload=
    returncode, complaints = verify(install.root, *(Path(path).name for path in argv[2:]))
    return subprocess.CompletedProcess(argv, returncode, "\n".join(complaints), "")


def follow(install: Install, argv: list[str]) -> None:
    key = " ".join(argv[:2])
    if argv[0] in NOT_RUN:
        install.not_run.append(key)
    elif argv[:3] == ["python3", "-m", "venv"]:
        venv = [sys.executable, "-m", "venv", "--without-pip", str(install.under(argv[3]))]
        subprocess.run(venv, check=True, timeout=120)
    elif argv[0].endswith("/bin/pip") and argv[1] == "install":
        _pip_install(install, argv)
    elif argv[0].endswith("/bin/advisor"):
        install.outcomes[" ".join(argv[1:3])] = _advisor(install, argv)
    elif argv[:2] == ["systemd-analyze", "verify"]:
        install.outcomes[key] = _verify(install, argv)
    else:
        pytest.fail(f"the admin guide's install has a step this test does not follow: {shlex.join(argv)}")


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    folder = tmp_path_factory.mktemp("install")
    done = Install(root=folder / "root", wheel=build_wheel(folder))
    done.root.mkdir()
    for argv in guide_steps():
        follow(done, argv)
    yield done


def test_the_guide_installs_units_systemd_analyze_verify_accepts(install: Install) -> None:
    assert install.not_run == ["useradd --system", "systemctl daemon-reload", "systemctl enable"]
    written = install.outcomes["init-site /"]
    assert written.returncode == 0, written.stderr
    for name in UNITS:
        assert f"wrote     {install.under(f'{UNIT_DIR}/{name}')}: a systemd unit" in written.stdout
    verified = install.outcomes["systemd-analyze verify"]
    assert (verified.returncode, verified.stdout) == (0, "")
    for name in ("advisor.service", "advisor-bench.service"):
        text = install.under(f"{UNIT_DIR}/{name}").read_text()
        commands = re.findall(r"^ExecStart=-?(\S+)", text, flags=re.MULTILINE)
        assert set(commands) == {"/opt/advisor/venv/bin/advisor"}, "the venv the guide made"
    # The command the units run is the wheel's own, installed in that venv.
    assert os.access(install.under("/opt/advisor/venv/bin/advisor"), os.X_OK)


def test_the_guide_checks_the_policy_init_site_wrote(install: Install) -> None:
    checked = install.outcomes["policy check"]
    assert checked.returncode == 0, checked.stderr
    assert install.under(f"{CONFIG_DIR}/policy.toml").read_text() == (REPO / POLICY).read_text()
    settings = install.under(f"{CONFIG_DIR}/advisor.toml").read_text()
    assert settings == (REPO / "etc/advisor.toml").read_text()


def test_the_installed_units_rate_as_the_docs_say(install: Install) -> None:
    said = re.findall(r"rates them (\d+\.\d)", (REPO / "systemd/README.md").read_text())
    rated = {exposure(install.root, name) for name in ("advisor.service", "advisor-bench.service")}
    assert rated == set(said), (rated, said)


def test_init_site_again_keeps_an_edited_policy_and_updates_what_nobody_changed(
    install: Install, tmp_path: Path
) -> None:
    site = Install(root=tmp_path, wheel=install.wheel)
    advisor = [str(install.under("/opt/advisor/venv/bin/advisor")), "init-site", str(tmp_path)]
    first = subprocess.run(advisor, env=_env(install), capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    policy, unit = site.under(f"{CONFIG_DIR}/policy.toml"), site.under(f"{UNIT_DIR}/advisor.service")
    shipped_unit = unit.read_text()
    policy.write_text(policy.read_text() + "\n# edited by the admins\n")
    # An older version's unit, as init-site wrote it then: nobody changed it since.
    unit.write_text(shipped_unit.replace("Restart=on-failure", "Restart=always"))
    record = site.under(f"{CONFIG_DIR}/init-site.json")
    record.write_text(json.dumps(json.loads(record.read_text()) | {str(UNIT_DIR / UNITS[0]): _sha256(unit)}))
    again = subprocess.run(advisor, env=_env(install), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"kept      {policy}: the policy: edit it" in again.stdout
    assert f"wrote     {unit}: a systemd unit" in again.stdout
    assert policy.read_text().endswith("# edited by the admins\n")
    assert unit.read_text() == shipped_unit
    forced = subprocess.run([*advisor, "--force"], env=_env(install), capture_output=True, text=True)
    assert f"wrote     {policy}" in forced.stdout and policy.read_text() == (REPO / POLICY).read_text()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


UNRUNNABLE = ["opt/advisor", "/a b", "/opt/%n", "/opt/$HOME", "/opt/../etc", "/opt//x", "/"]
"""Prefixes a unit's `ExecStart=` would read otherwise, or that are not plain absolute paths."""


@pytest.mark.parametrize("prefix", UNRUNNABLE)
def test_a_prefix_the_units_cannot_run_is_refused(prefix: str) -> None:
    with pytest.raises(PrefixError, match=re.escape(repr(prefix))):
        checked_prefix(prefix)


def test_init_site_writes_the_shipped_files_and_units_for_the_prefix_given() -> None:
    shipped = REPO / "advisor" / "site" / "files"
    files = site_files(lambda name: (shipped / name).read_text(), checked_prefix("/srv/a-1"))
    units = {file.path.name: file.text for file in files if file.path.parent == UNIT_DIR}
    assert sorted(units) == sorted(UNITS)
    for name, text in units.items():
        assert text == (REPO / "systemd" / name).read_text().replace(
            "/opt/advisor/venv/bin/", "/srv/a-1/bin/"
        )
    execs = re.findall(r"^Exec\w+=[-@+!]*(\S+)", "".join(units.values()), flags=re.MULTILINE)
    assert set(execs) == {"/srv/a-1/bin/advisor", "/bin/kill"}
    others = {str(file.path): file.text for file in files if file.path.parent != UNIT_DIR}
    assert others[f"{CONFIG_DIR}/policy.toml"] == (REPO / POLICY).read_text()
    assert others[f"{CONFIG_DIR}/constraints.txt"] == (REPO / "requirements/constraints.txt").read_text()


def test_the_login_nodes_base_install_runs_every_user_command(install: Install) -> None:
    client = install.under("/opt/advisor/client/bin")
    env = _env(install)

    def advisor(*words: str) -> subprocess.CompletedProcess[str]:
        argv = [str(client / "advisor"), *words]
        return subprocess.run(argv, env=env, cwd=install.root, capture_output=True, text=True, timeout=120)

    service = subprocess.run(
        [str(client / "python"), "-c", "import sqlite_utils"], env=env, capture_output=True
    )
    assert service.returncode != 0, "the base install has none of the service's packages"
    helped = advisor("--help")
    assert helped.returncode == 0, helped.stderr
    for command in ("parse", "explain", "status", "recommend", "cli-filter", "init-site", "bench", "daemon"):
        assert command in helped.stdout
    version = advisor("--version")
    assert (version.returncode, version.stdout) == (0, f"advisor {install.wheel.name.split('-')[1]}\n")
    parsed = advisor("parse", "--json", str(EXAMPLES / "train-flag.sbatch"), "-p", "a100")
    assert parsed.returncode == 0, parsed.stderr
    assert json.loads(parsed.stdout)["request"]["partitions"] == ["a100"]
    table = advisor("parse", str(EXAMPLES / "train-flag.sbatch"))
    assert table.returncode == 0 and "train-flag.sbatch" in table.stdout, table.stderr
    # Without a daemon both say so, in the daemon's words, not the service's packages'.
    explained = advisor("explain", "7")
    said = " ".join((explained.stdout + explained.stderr).split())
    assert explained.returncode == 1 and "did not answer" in said and "service" not in said, said
    # recommend asks the daemon here; with none, both reasons in one line.
    recommended = advisor("recommend", str(EXAMPLES / "train-flag.sbatch"))
    said = " ".join(recommended.stderr.split())
    assert recommended.returncode == 1 and "did not answer" in said, said
    assert "this install cannot recommend by itself" in said and "is not installed" in said, said
    status = advisor("status")
    assert status.returncode == 3, status.stderr
    assert "daemon: down" in status.stdout and "sqlite_utils is not installed" in status.stdout
    conf = install.root / "slurm"
    conf.mkdir()
    installed = advisor("cli-filter", "install", "--slurm-conf-dir", str(conf))
    assert installed.returncode == 0, installed.stderr
    # The Lua starts the base install's helper bare (python -I -S), and it answers from there.
    lua = (conf / "cli_filter.lua").read_text()
    helper = re.search(r'^local HELPER = "(.*)"$', lua, flags=re.MULTILINE)
    assert helper is not None and helper[1].startswith(f"{client / 'python'} -I -S -c "), lua
    options = install.root / "options.json"
    options.write_text(json.dumps({"argv": [str(EXAMPLES / "train-flag.sbatch")]}))
    command = f"{helper[1]} pre {options}"
    answered = subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True, text=True, timeout=60)
    assert answered.stdout == "#end\n" and "did not answer" in answered.stderr, answered.stderr
    # A command of the service's says so, alone, whatever words it is given.
    for words in (("bench", "--help"), ("daemon",), ("report", "--json")):
        refused = advisor(*words)
        assert refused.returncode == 1
        assert refused.stderr.startswith(f"advisor: error: advisor {words[0]} needs the service's packages: ")
        assert refused.stderr.endswith("is not installed (pip install 'advisor[service]')\n")
    # The tools: the sandbox needs nothing beyond the base install's packages; compression names its extra.
    sandbox = advisor("sandbox", "status", "--dir", str(install.root / "no-sandbox"))
    assert sandbox.returncode == 3 and "no sandbox runs in" in sandbox.stdout, sandbox.stderr
    compressed = advisor("compress", "model.pt", "--out", "model.advc")
    assert compressed.returncode == 1
    assert compressed.stderr.startswith("advisor: error: advisor compress needs advisor[compress]'s packages")
    assert compressed.stderr.endswith("is not installed (pip install 'advisor[compress]')\n")


@pytest.fixture(scope="module")
def daemon(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    server = started_daemon(sandbox, tmp_path_factory.mktemp("daemon"))
    yield server
    server.stop()  # nothing here stops it before


def test_the_login_nodes_base_install_recommends_through_the_daemon(
    install: Install, daemon: Daemon, tmp_path: Path
) -> None:
    """The daemon (the full install's) recommends a preview; the base install shows it; nothing is audited.
    The sandbox's Slurm answers the daemon, as a cluster's would."""
    base_advisor = install.under("/opt/advisor/client/bin/advisor")
    script = tmp_path / "train.sbatch"
    script.write_text(SCRIPT.format(name="base-recommend"), encoding="utf-8")
    env = {key: value for key, value in daemon.env.items() if key != "ADVISOR_ALLOW_ROOT"}

    def recommend(*words: str) -> subprocess.CompletedProcess[str]:
        argv = [str(base_advisor), "recommend", *words, str(script)]
        return subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    answered = recommend("--json")
    assert answered.returncode == 0, answered.stderr
    assert "the daemon's recommendation" in answered.stderr and "is not installed here" in answered.stderr
    result = json.loads(answered.stdout)
    assert result["chosen"]["candidate"]["partition"] == "a100", "as the daemon advises it (test_daemon)"
    assert {estimate["candidate"]["partition"] for estimate in result["candidates"]} >= {"a100", "t4"}
    shown = recommend()
    assert shown.returncode == 0, shown.stderr
    assert "--partition=a100" in shown.stdout, shown.stdout
    # A preview: the daemon kept no audit row of either.
    with contextlib.closing(sqlite3.connect(daemon.root / "advisor.db")) as db:
        assert db.execute("SELECT count(*) FROM audit").fetchone()[0] == 0
