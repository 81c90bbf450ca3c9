"""A shared folder as a hostile neighbour leaves it, and a user's own factory package beside it."""

from __future__ import annotations

from pathlib import Path

PACKAGE = """import torch


def build(num_classes=10):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, num_classes),
    )
"""


def plant(folder: Path, names: tuple[str, ...] = ("json", "pathlib", "torch", "pydantic")) -> Path:
    """Modules in a shared folder that, imported, leave a marker file: code no one asked to run."""
    marker = folder / "planted-ran"
    for name in names:
        (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write('{name} ')\n", encoding="utf-8")
    return marker


def package(folder: Path) -> Path:
    (folder / "mypkg").mkdir(parents=True)
    (folder / "mypkg" / "__init__.py").write_text("", encoding="utf-8")
    (folder / "mypkg" / "net.py").write_text(PACKAGE, encoding="utf-8")
    return folder
