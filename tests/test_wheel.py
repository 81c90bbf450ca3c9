"""A wheel built from the tree carries the package's data: installed alone, it finds its GPU specs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_a_wheel_installs_with_its_gpu_specifications_and_sandbox_description(tmp_path: Path) -> None:
    wheels, target, tree = tmp_path / "wheels", tmp_path / "site", tmp_path / "tree"
    # A copy, so the build neither reads nor leaves a build/ folder in the checkout.
    shutil.copytree(REPO / "advisor", tree / "advisor", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, tree / name)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w"]
    subprocess.run([*build, str(wheels), str(tree)], cwd=tree, check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("advisor-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        packed = {name for name in archive.namelist() if name.startswith("advisor/")}
    copied = {path.relative_to(tree).as_posix() for path in (tree / "advisor").rglob("*") if path.is_file()}
    assert packed == copied, "the wheel holds the tree, nothing stale and nothing missing"
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    probe = (
        "import json, advisor; from advisor import paths; from advisor.predict.service import load_specs; "
        "print(json.dumps([advisor.__file__, len(load_specs(paths.gpu_specs())), "
        "paths.package_data('sandbox.toml').is_file()]))"
    )
    env = {key: value for key, value in os.environ.items() if key != "ADVISOR_GPU_SPECS"}
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={**env, "PYTHONPATH": str(target)},
        cwd=tmp_path,  # not the checkout: the installed copy alone
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    where, specs, sandbox = json.loads(result.stdout)
    assert Path(where).is_relative_to(target), "the wheel's copy, not the checkout's"
    assert specs == len(list((REPO / "advisor" / "data" / "gpu-specs").glob("*.json"))) == 13
    assert sandbox
