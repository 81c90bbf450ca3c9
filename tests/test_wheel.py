"""A wheel built from the tree: it carries the package's data, `advisor predict` in a fresh venv finds its GPU
specifications, and the training side's install needs none of the service's dependencies."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.bench.results import read_jsonl
from advisor.bench.tables import zoo_table
from advisor.predict.registry import machines, train_machine
from advisor.predict.scaling import match_spec
from advisor.predict.service import load_specs
from advisor.store import Store

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "data" / "predict" / "cpu-zoo.jsonl"
SERVICE_ONLY = ("xgboost", "fabric", "apscheduler", "sqlite_utils", "aiohttp", "scipy", "matplotlib")
SERVICE_ONLY += ("sklearn", "prometheus_client")
"""What only the [service] extra brings (torch is the training job's own)."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("wheel")
    tree = root / "tree"
    # A copy, so the build neither reads nor leaves a build/ folder in the checkout.
    shutil.copytree(REPO / "advisor", tree / "advisor", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, tree / name)
    packed = tree / "advisor" / "site" / "files"
    assert not packed.is_symlink() and (packed / "policies" / "default.toml").is_file(), "links followed"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w"]
    subprocess.run([*build, str(root), str(tree)], cwd=tree, check=True, capture_output=True, timeout=300)
    (built,) = root.glob("advisor-*.whl")
    yield built


def test_the_wheel_holds_exactly_the_package(wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        packed = {name for name in archive.namelist() if name.startswith("advisor/")}
        metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode()
    fields = [line.split(": ", 1) for line in text.splitlines() if ": " in line]
    requires = [value for field, value in fields if field == "Requires-Dist"]
    extras = [value for field, value in fields if field == "Provides-Extra"]
    # Through the links in advisor/site/files/ (to policies/, systemd/, ...): the wheel holds their files.
    copied = {
        (Path(folder) / name).relative_to(REPO).as_posix()
        for folder, _, names in os.walk(REPO / "advisor", followlinks=True)
        for name in names
        if "__pycache__" not in Path(folder).parts
    }
    assert packed == copied, "the wheel holds the tree, nothing stale and nothing missing"
    base = sorted(re.split(r"[<>=!~ ;]", line)[0] for line in requires if "extra ==" not in line)
    assert base == ["pydantic", "rich"], "a training environment gets no service dependency"
    assert {"service", "compress", "sandbox"} <= set(extras), "the tools are optional parts of their own"


def test_advisor_predict_in_a_fresh_venv_finds_the_gpu_specifications(wheel: Path, tmp_path: Path) -> None:
    venv = _fresh_venv(wheel, tmp_path)
    python = venv / "bin" / "python"
    # The dependencies, from this venv's site-packages as a plain path: its .pth files (the checkout's
    # editable install among them) are not read, so `advisor` can only be the wheel's.
    site = Path(sysconfig.get_paths()["purelib"])
    target_site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (target_site / "dependencies.pth").write_text(f"{site}\n")
    store = Store.open(tmp_path / "advisor.db")
    store.ingest(read_jsonl(FIXTURE))
    for machine in machines(store):
        train_machine(store, machine, tmp_path / "models", zoo_table)
    env = {key: value for key, value in os.environ.items() if not key.startswith("ADVISOR_")}
    where = subprocess.run(
        [str(python), "-c", "import advisor; print(advisor.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(target_site), "the wheel's copy, not the checkout's"
    argv = [str(venv / "bin" / "advisor"), "predict", "--model", "resnet18", "--input-shape", "3,32,32"]
    argv += ["--batch-size", "8", "--partition", "a100", "--gpu", "A100-SXM4-40GB"]
    argv += ["--db", str(tmp_path / "advisor.db"), "--json"]
    result = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    prediction = json.loads(result.stdout)
    assert "scaled from" in prediction["note"] and "NVIDIA A100-SXM4-40GB" in prediction["note"]
    spec = match_spec("A100-SXM4-40GB", load_specs(REPO / "advisor" / "data" / "gpu-specs"))
    assert spec is not None and prediction["memory_bytes"] == spec.memory_bytes, "the specification's memory"


def test_the_training_side_imports_nothing_of_the_service() -> None:
    probe = (
        "import sys\n"
        f"blocked = {SERVICE_ONLY!r}\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in blocked: raise ImportError(f'{name} is the service\\'s')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import advisor.runtime, advisor.submit\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in blocked))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def _fresh_venv(wheel: Path, root: Path) -> Path:
    """A venv holding the wheel and, from this venv, only what the base install's dependencies need."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    return venv
