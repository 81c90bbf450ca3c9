"""The ``step_measurements`` table: every whole training step the benchmarks timed, keyed by its content."""

from __future__ import annotations

from advisor.records import ResultLine, StepConfig, StepMeasurement
from advisor.store.measurements import MeasurementRow, measured
from advisor.store.table import Table


class StepMeasurementRow(MeasurementRow):
    model: str
    input_size: int
    batch: int
    amp: bool
    channels_last: bool
    pinned: bool
    workers: int
    arch_hash: str | None = None
    steps: int | None = None
    non_device_share: float | None = None
    peak_memory_bytes: int | None = None
    pace_ratio: float | None = None
    pace_s: float | None = None

    @classmethod
    def of(cls, line: ResultLine, step: StepMeasurement) -> StepMeasurementRow:
        config = step.config
        return cls(
            **measured(line, step.median_s, step.fits, step.error),
            model=config.model,
            input_size=config.input_size,
            batch=config.batch,
            amp=config.amp,
            channels_last=config.channels_last,
            pinned=config.pinned,
            workers=config.workers,
            arch_hash=step.arch_hash,
            steps=step.steps,
            non_device_share=step.non_device_share,
            peak_memory_bytes=step.peak_memory_bytes,
            pace_ratio=step.pace_ratio,
            pace_s=step.pace_s,
        )

    def config(self) -> StepConfig:
        """The configuration it measured."""
        return StepConfig(
            model=self.model,
            input_size=self.input_size,
            batch=self.batch,
            amp=self.amp,
            channels_last=self.channels_last,
            pinned=self.pinned,
            workers=self.workers,
        )


STEP_MEASUREMENTS = Table("step_measurements", StepMeasurementRow, "key", indexes=("machine",))
