"""The truth `benchmarks/architecture_transfer.py` judges the kept-back CNNs against: each batch's median
measurement as a ratio to the pace step, at the zoo database's pace, not the row the database returns last."""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import torch

from advisor.bench.results import read_jsonl
from advisor.introspect.run import introspect
from advisor.introspect.table import LayerKind
from advisor.records import ResultLine, StepMeasurement
from advisor.store import Store
from benchmarks.architecture_transfer import _truth, slug
from benchmarks.harness import transfer_nets

FIRST = read_jsonl(Path(__file__).parent / "data" / "predict" / "cpu-zoo.jsonl")[0]
T0 = datetime(2026, 12, 5, 10, 35, tzinfo=UTC)


def _step(ratio: float, batch: int, minute: int, pace_s: float = 0.03) -> ResultLine:
    measured = FIRST.measurement
    assert isinstance(measured, StepMeasurement), "the fixture's first line is a step"
    config = measured.config.model_copy(update={"batch": batch})
    measurement = measured.model_copy(
        update={
            "config": config,
            "fits": True,
            "pace_ratio": ratio,
            "pace_s": pace_s,
            "median_s": ratio * pace_s,
        }
    )
    when = T0 + timedelta(minutes=minute)
    return FIRST.model_copy(
        update={"run_id": f"process-{minute}", "measured_at": when, "measurement": measurement}
    )


def test_a_batch_s_truth_is_its_median_measurement_at_the_zoo_s_pace(tmp_path: Path) -> None:
    zoo = tmp_path / "zoo.db"
    Store.open(zoo).ingest([_step(1.0, 1, 0, pace_s=0.05)])
    reference = "benchmarks.harness.transfer_nets:vgg5x5"
    # Three processes' measurements of batch 8, the stray one last; batch 2 measured once.
    Store.open(tmp_path / f"{slug(reference)}-truth.db").ingest(
        [_step(0.5, 8, 1), _step(0.6, 8, 2), _step(2.0, 8, 3), _step(0.2, 2, 4)]
    )
    args = argparse.Namespace(work=tmp_path, zoo=zoo, reuse_truth=True, batches=[2, 8])
    truth = _truth(args, reference, "3,32,32")
    assert truth == {8: pytest.approx(0.05 * 0.6), 2: pytest.approx(0.05 * 0.2)}


@pytest.mark.parametrize("name", ["vgg5x5", "dilated", "encoder", "mixer"])
def test_each_kept_back_net_trains_on_32px_images_into_10_logits(name: str) -> None:
    """The factories the kept-back judgement measures: a training step runs, and its layer table holds
    what makes the net one no zoo has (the wide or dilated kernels, attention, the token-mixing linears)."""
    net = getattr(transfer_nets, name)()
    logits = net(torch.randn(2, 3, 32, 32))
    assert logits.shape == (2, 10)
    logits.sum().backward()
    table = introspect(f"benchmarks.harness.transfer_nets:{name}", (3, 32, 32), {}, allow_factories=True)
    kinds = Counter(layer.kind for layer in table.layers)
    windows = [layer.window for layer in table.layers if layer.window is not None]
    mark = {
        "vgg5x5": any(w.kernel == (5, 5) for w in windows),
        "dilated": any(w.dilation == (8, 8) for w in windows),
        "encoder": kinds[LayerKind.ATTENTION] == 3,
        "mixer": kinds[LayerKind.ATTENTION] == 0 and kinds[LayerKind.LINEAR] == 17,
    }
    assert mark[name], kinds
