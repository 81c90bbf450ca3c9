"""Median time to introspect a model on the meta device, uncached and cached.

Run: python -m benchmarks.introspect_speed [--model resnet50] [--runs 7]
Targets on a 2-core machine: at most 0.5 s uncached, at most 5 ms cached, for resnet50 at 224x224.
"""

from __future__ import annotations

import argparse
import statistics
import time

from advisor.introspect.run import clear_cache, introspect


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--input-shape", default="3,224,224")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    c, h, w = (int(side) for side in args.input_shape.split(","))
    shape = (c, h, w)

    introspect(args.model, shape, allow_factories=False)  # imports and first-call set-up are not the subject
    uncached = []
    for _ in range(args.runs):
        clear_cache()
        start = time.perf_counter()
        introspect(args.model, shape, allow_factories=False)
        uncached.append(time.perf_counter() - start)
    cached = []
    for _ in range(max(args.runs, 100)):
        start = time.perf_counter()
        introspect(args.model, shape, allow_factories=False)
        cached.append(time.perf_counter() - start)
    label = f"{args.model} at {args.input_shape}"
    print(f"{label}: median of {args.runs} uncached runs {statistics.median(uncached):.3f} s")
    print(f"{label}: median of {len(cached)} cached runs {statistics.median(cached) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
