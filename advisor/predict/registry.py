"""Training every machine's predictors from the database and swapping them in atomically.

A new version is written to its own file (temporary name, fsync, rename over), its sha256 recorded with it
(`advisor.predict.model_files` checks it at every load), before one transaction makes it active; a crash
before that transaction leaves the previous version active and intact, a crash inside it changes nothing.
Older files are kept, so any registered version can be served again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from math import exp, log
from pathlib import Path
from statistics import median
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from advisor.introspect import LayerTable
from advisor.predict.curves import median_polish
from advisor.predict.heldout import fit_with_bands
from advisor.predict.machine import LayerSample, MachineModel, StepSample
from advisor.predict.model_files import checked_model, write_version_file
from advisor.records import LayerConfig
from advisor.store import LayerMeasurementRow, ModelRegistry, ModelVersionRow, StepMeasurementRow, Store

TableSource = Callable[[str, int], LayerTable]
HELDOUT_FOLDS = 5
DEFAULT_MAX_WORSE_MAPE = 0.02
_CUT_EACH_END = 0.25
PACE_BAND = 1.1
"""How far a measurement's pace step may stray from its run's median and still be trusted (`_paced_ratio`)."""
_LEAST_SPAN_S = 1.0
"""A run's weight in the machine's pace is at least this, however few rows it wrote."""
K = TypeVar("K", bound=Hashable)
MeasurementRow = StepMeasurementRow | LayerMeasurementRow


class TrainedVersion(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    machine: str
    version: int
    path: Path
    step_rows: int
    layer_rows: int
    heldout_mape: float | None
    seconds: float
    activated: bool
    """False when the quality gate kept the active version: ``advisor models activate`` can still."""


def machines(store: Store) -> list[str]:
    return sorted({row.machine for row in store.step_rows()})


def layer_samples(rows: Iterable[LayerMeasurementRow]) -> list[LayerSample]:
    """One sample per configuration of one machine, paced or not as the steps are (``step_samples``)."""
    groups: dict[LayerConfig, list[LayerMeasurementRow]] = {}
    for row in rows:
        if row.fits and row.median_s is not None:
            config = row.config()
            groups.setdefault(config, []).append(row)
    seconds = _seconds(groups)
    return [LayerSample(config, seconds[config][0]) for config in groups]


def _seconds(groups: Mapping[K, Sequence[MeasurementRow]]) -> dict[K, tuple[float, tuple[float, ...]]]:
    """Each configuration's seconds from its measurements. Paced: its ratio to the pace step at the
    machine's pace (the median pace step), after each run's own level is taken out (``median_polish`` over
    runs and configurations): the pace step keeps one speed through a run, while whole runs on one VM differ.
    What is left of the noise goes both ways and lies between measurements, so a configuration's runs count
    by their interquartile mean: a wild quarter at either end is cut, as by the median, but the middle half
    is averaged, not one value taken (figures: benchmarks/README.md). Unpaced: the fastest, as a shared
    node's noise only adds time.
    Measured both ways, the paced ones count. Beside it, each run's own seconds (paced: at the machine's
    pace, its run's level taken out), which the band of a measured configuration is held out from."""
    # Imported here: only training needs scipy.stats, and every process that loads a model would import it.
    from scipy.stats import trim_mean  # type: ignore[import-untyped]

    paced = [(row, key) for key, members in groups.items() for row in members if row.pace_ratio]
    pace = machine_pace([row for row, _ in paced])
    run_paces = _run_paces(_paced_runs(row for row, _ in paced))
    cells = [(row.run_id, key, log(_paced_ratio(row, run_paces.get(row.run_id)))) for row, key in paced]
    levels, _effects = median_polish(cells)
    relative: dict[K, list[float]] = {}
    for run, key, value in cells:
        relative.setdefault(key, []).append(value - levels[run])
    return {
        key: (
            pace * exp(float(trim_mean(relative[key], _CUT_EACH_END))),
            tuple(pace * exp(v) for v in relative[key]),
        )
        if key in relative
        else (min(runs := [float(row.median_s or 0.0) for row in members]), tuple(runs))
        for key, members in groups.items()
    }


def _paced_runs(rows: Iterable[MeasurementRow]) -> dict[str, list[MeasurementRow]]:
    """Each run's rows that timed the pace step."""
    runs: dict[str, list[MeasurementRow]] = {}
    for row in rows:
        if row.pace_s:
            runs.setdefault(row.run_id, []).append(row)
    return runs


def _run_paces(runs: Mapping[str, Sequence[MeasurementRow]]) -> dict[str, float]:
    """Each run's median pace step (``runs`` as `_paced_runs` groups them)."""
    return {run: median(float(row.pace_s or 0.0) for row in members) for run, members in runs.items()}


def _paced_ratio(row: MeasurementRow, run_pace: float | None) -> float:
    """A row's ratio to the pace step, that pace held within `PACE_BAND` of its run's median.

    A measurement's own pace steps can stray alone: on the 45-minute pass of 2026-12-05 they took 4.6 times
    their run's median through a whole measurement (resnet34 at batch 64) whose steps ran at their usual
    speed, and its ratio put that step at a fifth of its time. Held within the band, a pace still follows
    the drifts of a few percent it is there for (benchmarks/README.md)."""
    ratio = float(row.pace_ratio or 0.0)
    if not row.pace_s or not run_pace:
        return ratio
    trusted = min(max(row.pace_s, run_pace / PACE_BAND), run_pace * PACE_BAND)
    return ratio * row.pace_s / trusted


def machine_pace(rows: Sequence[MeasurementRow]) -> float:
    """The machine's pace step, in seconds: each run's median pace step, the runs weighted by how long they
    ran rather than by how many rows they wrote. A first sight writes dozens of rows in minutes, maybe in a
    slow spell of a shared CPU; counted by rows, it moved every prediction of the machine (a 3-minute first
    sight beside a 9-minute grid pass of steps, 1.72x: benchmarks/README.md)."""
    runs = _paced_runs(rows)
    paces = _run_paces(runs)
    weighted = []
    for run, members in runs.items():
        times = [row.measured_at for row in members]
        weighted.append((paces[run], max((max(times) - min(times)).total_seconds(), _LEAST_SPAN_S)))
    weighted.sort()
    half, passed = sum(weight for _, weight in weighted) / 2, 0.0
    for pace, weight in weighted:
        passed += weight
        if passed >= half:
            return pace
    return 0.0


def step_samples(rows: Iterable[StepMeasurementRow], tables: TableSource) -> list[StepSample]:
    """One sample per configuration of one machine (see ``_seconds``), and its median peak memory."""
    groups: dict[tuple[str, int, int, bool, bool], list[StepMeasurementRow]] = {}
    for row in rows:
        if row.fits and row.median_s is not None:
            settings = (row.batch, row.amp, row.channels_last)
            groups.setdefault((row.model, row.input_size, *settings), []).append(row)
    seconds = _seconds(groups)
    samples = []
    for key, members in groups.items():
        model, size, batch, amp, channels_last = key
        peaks = [row.peak_memory_bytes for row in members if row.peak_memory_bytes]
        samples.append(
            StepSample(
                table=tables(model, size),
                model=model,
                batch=batch,
                amp=amp,
                channels_last=channels_last,
                seconds=seconds[key][0],
                peak_memory_bytes=round(median(peaks)) if peaks else None,
                runs=seconds[key][1],
            )
        )
    return samples


def train_machine(
    store: Store,
    machine: str,
    models_dir: Path,
    tables: TableSource,
    *,
    max_worse_mape: float | None = DEFAULT_MAX_WORSE_MAPE,
    written: Callable[[Path], None] = lambda _path: None,
) -> TrainedVersion:
    """Fits, writes and records one machine's new version, and activates it unless the quality gate holds
    it back (`passes_gate`); ``written`` runs between file and registry."""
    began = time.monotonic()
    rows = store.step_rows(machine)
    steps = step_samples(rows, tables)
    layers = layer_samples(store.layer_rows(machine))
    model = fit_with_bands(machine, steps, layers, folds=HELDOUT_FOLDS)
    registry = ModelRegistry(store)
    active = registry.active(machine)
    # A quarantined version serves nothing, so it holds no new one back.
    serving = None if active is None or active.quarantined else active.heldout_mape
    activate = passes_gate(model.heldout_mape, serving, max_worse_mape)
    measured = sorted(row.measured_at for row in rows)

    def write(version: int) -> ModelVersionRow:
        path = _version_file(models_dir, machine, version)
        sha256 = write_version_file(path, model.model_dump_json())
        written(path)
        return ModelVersionRow(
            machine=machine,
            version=version,
            path=path,
            sha256=sha256,
            created_at=datetime.now(UTC),
            step_rows=len(steps),
            layer_rows=len(layers),
            models=",".join(sorted({s.model for s in steps})),
            measured_from=measured[0],
            measured_to=measured[-1],
            heldout_mape=model.heldout_mape,
        )

    version = registry.add_version(machine, write, activate)
    return TrainedVersion(
        machine=machine,
        version=version,
        path=_version_file(models_dir, machine, version),
        step_rows=len(steps),
        layer_rows=len(layers),
        heldout_mape=model.heldout_mape,
        seconds=time.monotonic() - began,
        activated=activate,
    )


def _version_file(models_dir: Path, machine: str, version: int) -> Path:
    return models_dir / machine / f"v{version}.json"


def passes_gate(new_mape: float | None, active_mape: float | None, max_worse: float | None) -> bool:
    """A new version serves unless its held-out error is worse than the active one's by more than
    ``max_worse`` (absolute: 0.02 is two percentage points of MAPE). No gate (None), no active version or
    no held-out figure on either side lets it through: there is nothing to compare."""
    if max_worse is None or new_mape is None or active_mape is None:
        return True
    return new_mape <= active_mape + max_worse


def active_models(store: Store) -> dict[str, tuple[MachineModel, int]]:
    """Every machine's active predictor and version, by machine, in one query; a machine whose file fails
    its check (`checked_model`) has none, the others are served."""
    loaded = {}
    for row in ModelRegistry(store).all_active():
        model = None if row.quarantined else checked_model(store, row)
        if model is not None:
            loaded[row.machine] = (model, row.version)
    return loaded


def model_created_at(store: Store, machine: str, version: int) -> datetime | None:
    """When a version was trained: the policy trusts a model only while it is young."""
    for row in ModelRegistry(store).versions(machine):
        if row.version == version:
            return row.created_at
    return None
