#!/usr/bin/env bash
# Fetches wheels.txt's wheels for the GPU machine (CPython 3.12, x86-64 Linux) into .whl/ (ignored by git;
# a session runs this by hand before the `run` call that carries .whl, CI never does). Other wheels left in
# .whl/ are removed: each one there is installed, and two versions of one package stop the install.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .whl
grep -v '^#' benchmarks/gpu/wheels.txt | while read -r wheel; do
  [ -n "$wheel" ] || continue
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --abi cp312 --abi abi3 --abi none --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "$wheel"
done
ls .whl
du -sh .whl
