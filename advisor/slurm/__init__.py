"""Adapter between the advisor and Slurm's command-line tools (locally or over SSH).

``models``, ``values`` and the parsers are plain data and pure functions; ``client`` and ``runner`` run
Slurm's commands. Nothing is imported here: a module that reads `advisor.slurm.models` must not load the
runner (and with it ``subprocess``) by importing this package.
"""
