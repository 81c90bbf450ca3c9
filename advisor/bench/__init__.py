"""The nightly benchmarks: layer and whole-model training-step measurements per machine."""
