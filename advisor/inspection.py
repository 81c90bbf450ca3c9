"""``advisor inspect``: a model's layer table and totals, for a person (rich) or a program (JSON)."""

from __future__ import annotations

import argparse

from pydantic import JsonValue
from rich.console import Console
from rich.table import Table

from advisor import readable, terminal
from advisor.introspect.memory import Optimizer, estimate_peak_memory, optimizer_state_bytes
from advisor.introspect.run import TaskInput, introspect
from advisor.introspect.table import Layer, LayerTable, TensorShape
from advisor.precision import Precision

_UNITS = ("", "K", "M", "G", "T", "P", "E")


def inspect_command(args: argparse.Namespace, console: Console) -> int:
    """Runs in the user's own process, so factory references are allowed; IntrospectionError escapes."""
    kwargs: dict[str, JsonValue] = {} if args.num_classes is None else {"num_classes": args.num_classes}
    table = introspect(
        args.model,
        args.input_shape,
        kwargs | dict(args.model_arg),
        allow_factories=True,
        given=TaskInput(args.sequence_length, args.task),
    )
    if args.json:
        print(table.model_dump_json(indent=2))
    else:
        render(table, args.batch_size, console)
    return 0


def render(table: LayerTable, batch_size: int, console: Console) -> None:
    costs = table.at_batch(batch_size)
    rows = Table(title=f"{table.reference} at {_input(table)}, batch {batch_size}", title_justify="left")
    for header in ("#", "layer", "op", "kind", "input -> output", "window", "params"):
        rows.add_column(header, justify="right" if header in {"#", "params"} else "left")
    for header in ("fwd FLOPs", "bwd FLOPs", "read", "written"):
        rows.add_column(header, justify="right")
    for layer, cost in zip(table.layers, costs.layers, strict=True):
        rows.add_row(
            str(layer.index),
            layer.name or "(model)",
            layer.op,
            _kind(layer),
            f"{_shapes(layer.inputs, batch_size)} -> {_shapes(layer.outputs, batch_size)}",
            _window(layer),
            _si(layer.parameters),
            _si(cost.forward_flops),
            _si(cost.backward_flops),
            readable.size(cost.bytes_read),
            readable.size(cost.bytes_written),
        )
    terminal.show(rows, console)

    t = table.totals
    summary = Table(title="totals", show_header=False, title_justify="left")
    summary.add_column(justify="left")
    summary.add_column(justify="right")
    summary.add_row("parameters", f"{_si(t.parameters)} ({_si(t.unused_parameters)} unused)")
    summary.add_row("FLOPs per training step (fwd + bwd)", _si(costs.total.train_flops))
    summary.add_row("activations kept for backward (fp32)", readable.size(costs.saved_activation_bytes))
    for optimizer in Optimizer:
        summary.add_row(
            f"optimizer state, {optimizer}", readable.size(optimizer_state_bytes(t.parameters, optimizer))
        )
    summary.add_row("architecture hash", table.architecture_hash[:16])
    console.print(summary)

    memory = Table(title=f"estimated peak training memory at batch {batch_size}", title_justify="left")
    memory.add_column("precision")
    for optimizer in Optimizer:
        memory.add_column(str(optimizer), justify="right")
    for precision in Precision:
        estimates = (estimate_peak_memory(table, batch_size, precision, o).total for o in Optimizer)
        memory.add_row(str(precision), *(readable.size(total) for total in estimates))
    console.print(memory)
    from advisor.compress.estimate import render_savings  # a tool's table, loaded when shown

    render_savings(table, console)


def _input(table: LayerTable) -> str:
    """An image's ``3x224x224``, or a token model's ``128 tokens (causal-lm)``."""
    if table.sequence_length is None:
        return "x".join(map(str, table.input_shape))
    return f"{table.sequence_length} tokens" + ("" if table.task is None else f" ({table.task})")


def _kind(layer: Layer) -> str:
    w = layer.window
    if w is None or w.groups == 1:
        return str(layer.kind)
    return f"{layer.kind} (depthwise)" if layer.depthwise else f"{layer.kind} (groups {w.groups})"


def _shapes(shapes: tuple[TensorShape, ...], batch_size: int) -> str:
    return ", ".join("x".join(map(str, s.at_batch(batch_size))) or "scalar" for s in shapes)


def _window(layer: Layer) -> str:
    w = layer.window
    if w is None:
        return ""
    text = f"k{_dims(w.kernel)} s{_dims(w.stride)} p{_dims(w.padding)}"
    return text + (f" d{_dims(w.dilation)}" if any(d != 1 for d in w.dilation) else "")


def _dims(values: tuple[int, ...]) -> str:
    return str(values[0]) if len(set(values)) == 1 else "x".join(map(str, values))


def _si(value: int) -> str:
    """Decimal prefixes for counts (parameters, FLOPs); sizes read as `readable.size`."""
    scaled, exponent = float(value), 0
    while abs(scaled) >= 1000 and exponent < len(_UNITS) - 1:
        scaled, exponent = scaled / 1000, exponent + 1
    return str(value) if exponent == 0 else f"{scaled:.2f} {_UNITS[exponent]}"
