"""The ``layer_measurements`` table: every op configuration the benchmarks timed alone, keyed by its
content; a pair (kernel, stride, ...) is kept as its text, ``3x3``."""

from __future__ import annotations

from advisor.records import LayerConfig, LayerMeasurement, ResultLine
from advisor.store.measurements import MeasurementRow, measured
from advisor.store.table import Table


class LayerMeasurementRow(MeasurementRow):
    op: str
    in_channels: int
    out_channels: int
    kernel: str
    stride: str
    padding: str
    dilation: str
    groups: int
    depthwise: bool
    grouped: bool
    height: int
    width: int
    batch: int
    amp: bool
    cudnn_benchmark: bool
    pace_ratio: float | None = None
    pace_s: float | None = None
    channels_last: bool | None = None
    """None in rows from before the column: they measured contiguous inputs."""

    @classmethod
    def of(cls, line: ResultLine, layer: LayerMeasurement) -> LayerMeasurementRow:
        config = layer.config
        return cls(
            **measured(line, layer.median_s, layer.fits, layer.error),
            op=config.op,
            in_channels=config.in_channels,
            out_channels=config.out_channels,
            kernel=_text(config.kernel),
            stride=_text(config.stride),
            padding=_text(config.padding),
            dilation=_text(config.dilation),
            groups=config.groups,
            depthwise=config.depthwise,
            grouped=config.grouped,
            height=config.height,
            width=config.width,
            batch=config.batch,
            amp=config.amp,
            cudnn_benchmark=config.cudnn_benchmark,
            pace_ratio=layer.pace_ratio,
            pace_s=layer.pace_s,
            channels_last=config.channels_last,
        )

    def config(self) -> LayerConfig:
        """The configuration it measured."""
        return LayerConfig(
            op=self.op,
            in_channels=self.in_channels,
            out_channels=self.out_channels,
            kernel=_pair(self.kernel),
            stride=_pair(self.stride),
            padding=_pair(self.padding),
            dilation=_pair(self.dilation),
            groups=self.groups,
            height=self.height,
            width=self.width,
            batch=self.batch,
            amp=self.amp,
            cudnn_benchmark=self.cudnn_benchmark,
            channels_last=bool(self.channels_last),
        )


def _text(pair: tuple[int, int]) -> str:
    return f"{pair[0]}x{pair[1]}"


def _pair(text: str) -> tuple[int, int]:
    first, second = text.split("x")
    return int(first), int(second)


LAYER_MEASUREMENTS = Table("layer_measurements", LayerMeasurementRow, "key", indexes=("machine",))
