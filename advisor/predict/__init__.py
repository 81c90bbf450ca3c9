"""Per-machine predictors of a training step's time and peak memory, trained on the nightly benchmarks.

``features`` and ``jobtime`` are pure; ``model`` fits and applies the boosters; ``registry`` and ``cli``
are the edges (files, the database, introspection with torch).
"""
