"""A prediction for a model on a partition: the partition's own machine when it was benchmarked, with the
band of its evidence class and the confidence that band earns (`advisor.predict.bands`), else a roofline
scaling of a benchmarked machine's prediction, marked ``confidence: low``: no held-out measurement exists
for a machine never benchmarked."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from advisor.introspect import LayerTable
from advisor.policy.schema import Confidence
from advisor.predict.calibration import Correction, correction_for
from advisor.predict.machine import MachineModel
from advisor.predict.outcomes import corrections
from advisor.predict.peak_memory import MEMORY_MARGIN
from advisor.predict.registry import active_models
from advisor.predict.scaling import ASSUMED_CPU_FLOPS, DeviceSpec, match_spec, roofline_ratio
from advisor.predict.types import NoModelError, Prediction
from advisor.records import Fingerprint
from advisor.store import Store

_GB = 10**9


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


@dataclass(frozen=True)
class StepQuestion:
    """What a prediction answers: one device's step of a model (its layer table) at a micro-batch, with
    these settings, on a partition; ``devices``: the job's devices in all, among which ZeRO/FSDP shards
    the state a device holds (`LayerTable.training`; no effect on a table without a ZeRO stage)."""

    partition: str
    table: LayerTable
    batch: int
    amp: bool
    channels_last: bool
    devices: int = 1


@dataclass(frozen=True)
class Predictors:
    """All a prediction reads from the database, read at once: a recommendation makes dozens of predictions,
    and the daemon shares one reading between requests for a little while. Its answers are remembered for
    as long as the reading lives: a version file never changes, so the same question gets the same answer
    until a new reading (a new version, new calibration) replaces this one."""

    fingerprints: list[Fingerprint]
    models: dict[str, tuple[MachineModel, int]]
    """Each machine's active predictor and its version."""
    corrections: dict[str, Correction]
    """Calibration from finished jobs, by `Prediction.calibration_key`."""
    _answers: dict[tuple[object, ...], Prediction] = field(default_factory=dict, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @classmethod
    def load(cls, store: Store) -> Predictors:
        return cls(store.fingerprints(), active_models(store), corrections(store))

    def answer(self, machine: str, question: StepQuestion, capacity: int | None) -> Prediction:
        """Machine ``machine``'s own prediction, unscaled and uncalibrated, computed once per question."""
        q = question
        settings = (q.batch, q.amp, q.channels_last, q.devices)
        key = (machine, q.partition, q.table.architecture_hash, settings, capacity)
        with self._lock:
            found = self._answers.get(key)
        if found is None:
            model, version = self.models[machine]
            found = _predict_once(question, model, version, capacity)
            with self._lock:
                if len(self._answers) >= _ANSWERS_KEPT:
                    self._answers.clear()
                self._answers[key] = found
        return found


_ANSWERS_KEPT = 8192


def predict(
    predictors: Predictors, question: StepQuestion, specs: list[DeviceSpec], gpu: str | None = None
) -> Prediction:
    """``gpu`` names the partition's GPU type, for a partition never benchmarked (default: its name)."""
    # Partitions of identical nodes share a machine type, so a machine has many fingerprints.
    every = predictors.fingerprints
    own = {f.machine(): f for f in sorted(every, key=lambda f: f.node) if f.partition == question.partition}
    for machine, fingerprint in sorted(own.items()):
        if machine in predictors.models:
            found = predictors.answer(machine, question, _capacity(fingerprint))
            return _calibrated(found, predictors, question.table.architecture_hash)
    fingerprints = {f.machine(): f for f in every}
    scaled = _scaled(predictors, question, specs, gpu or question.partition, fingerprints)
    return _calibrated(scaled, predictors, question.table.architecture_hash)


def _calibrated(prediction: Prediction, predictors: Predictors, architecture: str) -> Prediction:
    """Finished jobs on the machine the prediction came from say how far its step times run off: those of
    this architecture where enough of them finished there, else all of the machine's. The band keeps its
    width and the confidence it earns: a correction moves the band, it does not narrow it. One beyond its
    bound (flagged in `advisor report`) says the predictor is off there: a step less confident."""
    correction = correction_for(predictors.corrections, prediction.calibration_key, architecture)
    if correction is None:
        return prediction
    factor = correction.factor
    confidence, note = prediction.confidence, prediction.note
    if correction.beyond_bound:
        confidence = _LOWER[confidence]
        flagged = f"calibrated x {factor:.2f} from {correction.jobs} finished jobs, beyond its bound"
        note = flagged if note is None else f"{note}; {flagged}"
    return prediction.model_copy(
        update={
            "step_s": prediction.step_s * factor,
            "step_p90_s": prediction.step_p90_s * factor,
            "step_p10_s": None if prediction.step_p10_s is None else prediction.step_p10_s * factor,
            "calibration": factor,
            "confidence": confidence,
            "note": note,
        }
    )


_LOWER: dict[Confidence, Confidence] = {"high": "medium", "medium": "low", "low": "low"}


def _capacity(fingerprint: Fingerprint) -> int | None:
    if fingerprint.gpu_memory_mb is None:
        return None
    return fingerprint.gpu_memory_mb * 2**20


def _predict_once(
    question: StepQuestion, model: MachineModel, version: int, capacity: int | None
) -> Prediction:
    table, amp, devices = question.table, question.amp, question.devices
    step = model.predict(table, question.batch, amp, question.channels_last, devices)
    return Prediction(
        partition=question.partition,
        machine=model.machine,
        model_version=version,
        batch_size=question.batch,
        amp=question.amp,
        channels_last=question.channels_last,
        step_s=step.step_s,
        step_p90_s=step.step_p90_s,
        step_p10_s=step.step_p10_s,
        peak_memory_bytes=step.peak_memory_bytes,
        memory_bytes=capacity,
        fits=capacity is None or step.peak_memory_bytes * (1 + MEMORY_MARGIN) <= capacity,
        largest_batch=None if capacity is None else model.memory.largest_batch(table, amp, capacity, devices),
        confidence=step.band.confidence,
        evidence=step.band.evidence,
        note=step.band.note(model.machine),
    )


def _scaled(
    predictors: Predictors,
    question: StepQuestion,
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
    partition = question.partition
    if not candidates:
        raise NoModelError(
            f"no benchmarked machine has a trained model to predict partition {partition!r} from"
        )
    target = match_spec(gpu, specs)
    ranked = sorted(candidates, key=lambda c: (c[0].device != "cuda", c[1].machine))
    fingerprint, model, _ = ranked[0]
    base = _base_spec(fingerprint, specs)
    found = predictors.answer(model.machine, question, None)
    own = found.model_copy(update={"confidence": "low", "evidence": "scaled"})
    if target is None:
        note = (
            f"partition {partition!r} was never benchmarked and no GPU specification matches {gpu!r}: "
            f"the time is machine {model.machine}'s "
            f"({fingerprint.gpu_name or fingerprint.cpu_model}), unscaled"
        )
        return own.model_copy(update={"scaled_from": model.machine, "note": note})
    costs = question.table.total_at(question.batch)
    ratio = roofline_ratio(costs.train_flops, costs.bytes_read + costs.bytes_written, base, target)
    capacity = target.memory_bytes
    fits = capacity is None or own.peak_memory_bytes * (1 + MEMORY_MARGIN) <= capacity
    note = (
        f"partition {partition!r} was never benchmarked: scaled from {base.name} to {target.name} by their "
        f"roofline (FP32 FLOP/s{', bandwidth' if base.bandwidth else ' only: a CPU has no bandwidth figure'})"
    )
    q = question
    largest = None if capacity is None else model.memory.largest_batch(q.table, q.amp, capacity, q.devices)
    return own.model_copy(
        update={
            "step_s": own.step_s * ratio,
            "step_p90_s": own.step_p90_s * ratio,
            "step_p10_s": None if own.step_p10_s is None else own.step_p10_s * ratio,
            "memory_bytes": capacity,
            "fits": fits,
            "largest_batch": largest,
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
