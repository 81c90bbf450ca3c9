"""A prediction for a model on a partition: the partition's own machine when it was benchmarked, else a
roofline scaling of a benchmarked machine's prediction, marked ``confidence: low``."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from advisor.introspect import LayerTable
from advisor.predict.calibration import Correction
from advisor.predict.machine import MEMORY_MARGIN, MachineModel
from advisor.predict.outcomes import corrections
from advisor.predict.registry import active_models
from advisor.predict.scaling import ASSUMED_CPU_FLOPS, DeviceSpec, match_spec, roofline_ratio
from advisor.records import Fingerprint
from advisor.store import Store

Confidence = Literal["high", "medium", "low"]
_GB = 10**9


class Prediction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    partition: str
    machine: str
    model_version: int
    batch_size: int
    amp: bool
    channels_last: bool
    step_s: float
    step_p90_s: float
    peak_memory_bytes: int
    memory_bytes: int | None
    """The device's memory; None on a CPU, whose host memory the fingerprint does not record."""
    fits: bool
    largest_batch: int | None
    confidence: Confidence
    calibration: float = 1.0
    """The machine's correction from finished jobs, already applied to the step times."""
    scaled_from: str | None = None
    note: str | None = None

    @property
    def calibration_key(self) -> str:
        """Finished jobs correct the machine that made the prediction; a scaled one, its own partition."""
        return self.machine if self.scaled_from is None else f"scaled:{self.partition}"


def load_specs(directory: Path) -> list[DeviceSpec]:
    """NeuSight's device files: memory GB, bandwidth GB/s, FP32 GFLOP/s."""
    specs = []
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        specs.append(
            DeviceSpec(
                name=str(data["Device"]),
                # AMD's files split matrix and vector throughput; convolutions run on the matrix units.
                flops=float(data.get("SingleFLOPs", data.get("SingleFLOPsMM", 0.0))) * 1e9,
                bandwidth=float(data["Mem_Bw"]) * 1e9,
                memory_bytes=int(float(data["Dev_Mem"]) * _GB),
            )
        )
    return specs


class NoModelError(LookupError):
    """No machine has a trained predictor: run ``advisor models train`` first."""


@dataclass(frozen=True)
class Predictors:
    """All a prediction reads from the database, read at once: a recommendation makes dozens of predictions,
    and the daemon shares one reading between requests for a little while."""

    fingerprints: list[Fingerprint]
    models: dict[str, tuple[MachineModel, int]]
    """Each machine's active predictor and its version."""
    corrections: dict[str, Correction]
    """Calibration from finished jobs, by `Prediction.calibration_key`."""

    @classmethod
    def load(cls, store: Store) -> Predictors:
        return cls(store.fingerprints(), active_models(store), corrections(store))


def predict(
    predictors: Predictors,
    partition: str,
    table: LayerTable,
    batch: int,
    amp: bool,
    channels_last: bool,
    specs: list[DeviceSpec],
    gpu: str | None = None,
) -> Prediction:
    # Partitions of identical nodes share a machine type, so a machine has many fingerprints.
    every = predictors.fingerprints
    fingerprints = {f.machine(): f for f in every}
    own = {f.machine(): f for f in sorted(every, key=lambda f: f.node) if f.partition == partition}
    for machine, fingerprint in sorted(own.items()):
        loaded = predictors.models.get(machine)
        if loaded is not None:
            model, version = loaded
            capacity = _capacity(fingerprint)
            confidence: Confidence = "high" if table.architecture_hash in model.architectures else "medium"
            found = _prediction(
                partition, model, version, table, batch, amp, channels_last, capacity, confidence
            )
            return _calibrated(found, predictors)
    target = gpu or partition
    scaled = _scaled(predictors, partition, table, batch, amp, channels_last, specs, target, fingerprints)
    return _calibrated(scaled, predictors)


def _calibrated(prediction: Prediction, predictors: Predictors) -> Prediction:
    """Finished jobs on the machine the prediction came from say how far its step times run off."""
    correction = predictors.corrections.get(prediction.calibration_key)
    if correction is None:
        return prediction
    factor = correction.factor
    return prediction.model_copy(
        update={
            "step_s": prediction.step_s * factor,
            "step_p90_s": prediction.step_p90_s * factor,
            "calibration": factor,
        }
    )


def _capacity(fingerprint: Fingerprint) -> int | None:
    if fingerprint.gpu_memory_mb is None:
        return None
    return fingerprint.gpu_memory_mb * 2**20


def _prediction(
    partition: str,
    model: MachineModel,
    version: int,
    table: LayerTable,
    batch: int,
    amp: bool,
    channels_last: bool,
    capacity: int | None,
    confidence: Confidence,
) -> Prediction:
    """Memoised: a version file never changes, so the same question gets the same answer until a new
    version is trained; the daemon asks the same few questions many times a second."""
    key = (partition, id(model), table.architecture_hash, batch, amp, channels_last, capacity)
    with _MEMO_LOCK:
        memo = _MEMO.get(key)
    # The entry keeps its model alive, so an equal id is the same model, never a new one at that address.
    if memo is not None and memo[0] is model:
        found = memo[1]
    else:
        found = _predict_once(partition, model, version, table, batch, amp, channels_last, capacity)
        with _MEMO_LOCK:
            if len(_MEMO) >= _MEMO_SIZE:
                _MEMO.clear()
            _MEMO[key] = (model, found)
    return found.model_copy(update={"confidence": confidence})


_MEMO: dict[tuple[object, ...], tuple[MachineModel, Prediction]] = {}
_MEMO_LOCK = threading.Lock()
_MEMO_SIZE = 8192


def _predict_once(
    partition: str,
    model: MachineModel,
    version: int,
    table: LayerTable,
    batch: int,
    amp: bool,
    channels_last: bool,
    capacity: int | None,
) -> Prediction:
    step = model.predict(table, batch, amp, channels_last)
    return Prediction(
        partition=partition,
        machine=model.machine,
        model_version=version,
        batch_size=batch,
        amp=amp,
        channels_last=channels_last,
        step_s=step.step_s,
        step_p90_s=step.step_p90_s,
        peak_memory_bytes=step.peak_memory_bytes,
        memory_bytes=capacity,
        fits=capacity is None or step.peak_memory_bytes * (1 + MEMORY_MARGIN) <= capacity,
        largest_batch=None if capacity is None else model.largest_batch(table, amp, capacity),
        confidence="high",
    )


def _scaled(
    predictors: Predictors,
    partition: str,
    table: LayerTable,
    batch: int,
    amp: bool,
    channels_last: bool,
    specs: list[DeviceSpec],
    gpu: str,
    fingerprints: dict[str, Fingerprint],
) -> Prediction:
    """Scaled from the first benchmarked machine with a specification, a GPU before a CPU."""
    candidates = [
        (fingerprints[machine], *loaded)
        for machine, loaded in predictors.models.items()
        if machine in fingerprints
    ]
    if not candidates:
        raise NoModelError(
            f"no benchmarked machine has a trained model to predict partition {partition!r} from"
        )
    target = match_spec(gpu, specs)
    ranked = sorted(candidates, key=lambda c: (c[0].device != "cuda", c[1].machine))
    fingerprint, model, version = ranked[0]
    base = _base_spec(fingerprint, specs)
    own = _prediction(partition, model, version, table, batch, amp, channels_last, None, "low")
    if target is None:
        note = (
            f"partition {partition!r} was never benchmarked and no GPU specification matches {gpu!r}: "
            f"the time is machine {model.machine}'s "
            f"({fingerprint.gpu_name or fingerprint.cpu_model}), unscaled"
        )
        return own.model_copy(update={"scaled_from": model.machine, "note": note})
    costs = table.at_batch(batch).total
    ratio = roofline_ratio(costs.train_flops, costs.bytes_read + costs.bytes_written, base, target)
    capacity = target.memory_bytes
    fits = capacity is None or own.peak_memory_bytes * (1 + MEMORY_MARGIN) <= capacity
    note = (
        f"partition {partition!r} was never benchmarked: scaled from {base.name} to {target.name} by their "
        f"roofline (FP32 FLOP/s{', bandwidth' if base.bandwidth else ' only: a CPU has no bandwidth figure'})"
    )
    return own.model_copy(
        update={
            "step_s": own.step_s * ratio,
            "step_p90_s": own.step_p90_s * ratio,
            "memory_bytes": capacity,
            "fits": fits,
            "largest_batch": None if capacity is None else model.largest_batch(table, amp, capacity),
            "scaled_from": model.machine,
            "note": note,
        }
    )


def _base_spec(fingerprint: Fingerprint, specs: list[DeviceSpec]) -> DeviceSpec:
    if fingerprint.gpu_name:
        found = match_spec(fingerprint.gpu_name, specs)
        if found is not None:
            return found
    return DeviceSpec(name=f"{fingerprint.cpu_model} (assumed)", flops=ASSUMED_CPU_FLOPS)
