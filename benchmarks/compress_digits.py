"""Shared-curve compression on scikit-learn's handwritten digits: accuracy against size.

Trains an MLP and a small CNN (fixed seed, CPU, one thread), then for each pruning threshold and index
width compresses the chosen layers, loads the file back into the model and measures test accuracy.

    python -m benchmarks.compress_digits --plot /tmp/compress_digits.png
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

from advisor.compress.checkpoint import LayerKinds, compress_state, load, save

matplotlib.use("Agg")
import matplotlib.pyplot as plt

PRUNE = (0.0, 0.1, 0.25, 0.5)
BITS: tuple[int | None, ...] = (None, 5, 4, 3, 2)


Split = tuple[torch.Tensor, torch.Tensor]


def data() -> tuple[Split, Split]:
    """Train and test images (N x 1 x 8 x 8, scaled to [0, 1]) with labels; 30% held out, stratified."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(
        images, digits.target, test_size=0.3, random_state=0, stratify=digits.target
    )
    return (
        (torch.from_numpy(x_train).unsqueeze(1), torch.from_numpy(y_train).long()),
        (torch.from_numpy(x_test).unsqueeze(1), torch.from_numpy(y_test).long()),
    )


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)
    )


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


def train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, seed: int) -> None:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        for batch in torch.randperm(len(x), generator=generator).split(32):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
            optimizer.step()
    model.eval()


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(x).argmax(dim=1) == y).float().mean()) * 100


@dataclass(frozen=True)
class Row:
    model: str
    layers: str
    seed: int
    eps: float
    bits: int | None
    raw: int
    packed: int
    file_bytes: int
    before: float
    after: float

    @property
    def ratio(self) -> float:
        return self.raw / self.packed


def sweep(name: str, model: nn.Module, layers: LayerKinds, seed: int, test: Split, folder: Path) -> list[Row]:
    """Every (EPS, bits) setting, each through a written file loaded back into the model."""
    x_test, y_test = test
    state = {key: value.clone() for key, value in model.state_dict().items()}
    before = accuracy(model, x_test, y_test)
    rows = []
    for eps in PRUNE:
        for bits in BITS:
            compressed = compress_state(state, layers, eps, bits)
            file_bytes = save(compressed, folder / "model.advc")
            model.load_state_dict(load(folder / "model.advc"))
            after = accuracy(model, x_test, y_test)
            model.load_state_dict(state)
            reports = compressed.reports()
            if eps == 0 and bits is None:
                for r in reports:
                    shape = "x".join(map(str, r.shape))
                    print(
                        f"  {name} seed {seed} {r.name:8} {shape:10} {r.index_bits:2d} bits "
                        f"{r.bytes_before:8,d} -> {r.bytes_after:7,d} B ({r.ratio:4.1f}x) "
                        f"error {r.error:.3f} R^2 {r.normal_r2:.4f} shift {r.shifted}"
                    )
            raw = sum(r.bytes_before for r in reports)
            packed = sum(r.bytes_after for r in reports)
            rows.append(Row(name, layers, seed, eps, bits, raw, packed, file_bytes, before, after))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--plot", type=Path, required=True, help="PNG of compressed size against accuracy")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=1, help="models trained per architecture")
    args = parser.parse_args()
    torch.set_num_threads(1)
    (x_train, y_train), test = data()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(args.seeds):
            for name, factory in (("mlp", mlp), ("cnn", cnn)):
                torch.manual_seed(seed)
                model = factory()
                train(model, x_train, y_train, args.epochs, seed)
                for layers in ("linear", "linear+conv") if name == "cnn" else ("linear",):
                    rows.extend(sweep(name, model, layers, seed, test, Path(folder)))
    print(
        f"{'model':5} {'layers':11} {'seed':>4} {'eps':>5} {'bits':>4} {'before B':>9} {'after B':>8} "
        f"{'ratio':>6} {'file B':>8} {'acc':>6} {'acc c.':>6} {'delta':>6}"
    )
    for row in rows:
        print(
            f"{row.model:5} {row.layers:11} {row.seed:4d} {row.eps:5.2f} {row.bits or 'full':>4} "
            f"{row.raw:9,d} {row.packed:8,d} {row.ratio:5.1f}x {row.file_bytes:8,d} "
            f"{row.before:6.2f} {row.after:6.2f} {row.after - row.before:+6.2f}"
        )
    summarise(rows, args.plot)


def summarise(rows: list[Row], plot: Path) -> None:
    """Mean over seeds per setting; the plot shows mean accuracy against the layers' compression ratio."""
    groups: dict[tuple[str, str, float, int | None], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.model, row.layers, row.eps, row.bits), []).append(row)
    print(
        f"\nmean over seeds: {'model':5} {'layers':11} {'eps':>5} {'bits':>4} {'ratio':>6} {'delta':>6} rose"
    )
    fig, ax = plt.subplots(figsize=(8, 5))
    series: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for (model, layers, eps, bits), members in groups.items():
        ratio = float(np.mean([m.ratio for m in members]))
        before = float(np.mean([m.before for m in members]))
        after = float(np.mean([m.after for m in members]))
        rose = sum(m.after > m.before for m in members)
        print(
            f"{'':17}{model:5} {layers:11} {eps:5.2f} {bits or 'full':>4} {ratio:5.1f}x "
            f"{after - before:+6.2f} {rose}/{len(members)}"
        )
        series.setdefault((model, layers), []).append((ratio, after, before))
    for (model, layers), points in series.items():
        ratios, afters, befores = zip(*points, strict=True)
        (line,) = ax.plot(ratios, afters, "o", label=f"{model} {layers} (float32 {befores[0]:.2f}%)")
        ax.axhline(befores[0], color=line.get_color(), linestyle=":", linewidth=1)
    ax.axvline(4, color="grey", linewidth=0.8)
    ax.set_xlabel("compression ratio of the chosen layers (float32 bytes / compressed bytes)")
    ax.set_ylabel("test accuracy (%), mean over seeds")
    ax.set_title("Shared-curve compression on digits: prune EPS x index bits")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(plot, dpi=120)
    print(f"plot: {plot}")


if __name__ == "__main__":
    main()
