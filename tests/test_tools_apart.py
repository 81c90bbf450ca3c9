"""The product apart from its tools: the sandbox and compression are optional parts (an extra and a command
group each, loaded only when asked for), and the benchmarks import as a package, without path hacks."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import torch
from torch import nn

from advisor.cli import COMMAND_MODULES, EXTRAS

REPO = Path(__file__).resolve().parent.parent
TOOLS = ("advisor.sandbox", "advisor.compress")
TOOL_USERS = {
    "advisor.inspection": "`advisor inspect` shows what `advisor compress` would save (numpy, with torch's)",
}
"""Modules of the product that import a tool, and why; `advisor.cli` names the tools' command modules as
strings, and imports them only for their command."""
SERVICE_ONLY = ("xgboost", "fabric", "apscheduler", "sqlite_utils", "aiohttp", "scipy", "matplotlib")
SERVICE_ONLY += ("sklearn", "prometheus_client", "transformers", "timm")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _module(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def test_the_product_imports_neither_tool() -> None:
    """Nothing of the product reaches into the sandbox or compression, at any depth of a module, except where
    `TOOL_USERS` says why."""
    found = {
        name: sorted(target for target in _imports(path) if target.startswith(TOOLS))
        for path in sorted((REPO / "advisor").rglob("*.py"))
        if not (name := _module(path)).startswith(TOOLS)
    }
    assert sorted(name for name, reached in found.items() if reached) == sorted(TOOL_USERS)


def test_each_tool_is_an_extra_and_a_command_group_of_its_own() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]
    modules = dict(COMMAND_MODULES)
    assert modules["advisor.sandbox.cli"] == ("sandbox",)
    assert modules["advisor.compress.cli"] == ("compress", "decompress")
    assert {EXTRAS[name] for names in modules.values() for name in names if name in EXTRAS} <= set(extras)
    assert "numpy" in " ".join(extras["compress"]) and "torch" in " ".join(extras["compress"])


def _blocked(blocked: tuple[str, ...], body: str) -> str:
    """A probe that runs ``body`` where ``blocked`` packages cannot be imported, as on an install without
    them: each raises ModuleNotFoundError naming itself."""
    return textwrap.dedent(f"""
        import sys
        blocked = {blocked!r}
        class Absent:
            def find_spec(self, name, path=None, target=None):
                if name.split('.')[0] in blocked:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        sys.meta_path.insert(0, Absent())
    """) + textwrap.dedent(body)


def _run(probe: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_sandbox_command_runs_on_the_base_install_s_packages(tmp_path: Path) -> None:
    """`advisor sandbox status` with the service's packages, torch and numpy unimportable: it reads its
    cluster description and says nothing runs (its Python needs are the base install's)."""
    body = """
        from advisor.cli import main
        raise SystemExit(main(["sandbox", "status", "--dir", sys.argv[1]]))
    """
    result = _run(_blocked((*SERVICE_ONLY, "torch", "numpy"), body), str(tmp_path / "none"))
    assert result.returncode == 3, result.stderr
    assert "no sandbox runs in" in result.stdout, result.stdout


def test_compression_runs_without_the_service(tmp_path: Path) -> None:
    checkpoint, out = tmp_path / "model.pt", tmp_path / "model.advc"
    torch.save(nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4)).state_dict(), checkpoint)
    body = """
        from advisor.cli import main
        raise SystemExit(main(["compress", sys.argv[1], "--out", sys.argv[2], "--index-bits", "4"]))
    """
    result = _run(_blocked(SERVICE_ONLY, body), str(checkpoint), str(out))
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size < checkpoint.stat().st_size


def test_a_tool_whose_packages_are_missing_names_its_own_extra(tmp_path: Path) -> None:
    """Before: every command's missing package sent the user to ``advisor[service]``."""
    body = """
        from advisor.cli import main
        raise SystemExit(main(["compress", sys.argv[1], "--out", sys.argv[2]]))
    """
    result = _run(_blocked(("numpy", "torch"), body), str(tmp_path / "model.pt"), str(tmp_path / "out"))
    assert result.returncode == 1
    assert result.stderr == (
        "advisor: error: advisor compress needs advisor[compress]'s packages: "
        "numpy is not installed (pip install 'advisor[compress]')\n"
    )


def test_the_benchmarks_import_as_a_package_without_changing_the_import_path() -> None:
    """`python -m benchmarks.NAME` from the repository root: no script inserts its folder's parent into
    ``sys.path`` (before: six did, with 42 ``noqa: E402``)."""
    hacks = sorted(
        str(path.relative_to(REPO))
        for path in (REPO / "benchmarks").rglob("*.py")
        if "sys.path" in (text := path.read_text("utf-8")) or "noqa: E402" in text
    )
    assert hacks == []
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.sandbox_speed", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0 and "usage:" in result.stdout, result.stderr
