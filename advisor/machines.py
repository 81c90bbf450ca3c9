"""Machines by name: each fingerprinted machine's hash (`Fingerprint.machine`) gets a name a person can
type and read (its GPU model, ``a100``; or ``cpu-<model>-<cores>c``), and a command given a partition, a
name or a hash finds the machine meant."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from advisor.records import Fingerprint

_VENDOR_WORDS = {"nvidia", "tesla", "geforce", "amd", "intel", "processor", "cpu", "core", "(r)", "(tm)"}
_CLOCK = re.compile(r"@.*$")
_HASH = re.compile(r"[0-9a-f]{16}")


class UnknownMachine(LookupError):
    """A word that names no partition, machine name or hash the store knows."""


def machine_names(fingerprints: Iterable[Fingerprint]) -> dict[str, str]:
    """Each machine hash's name, unique among them: a name two machines would share gets its hash's first
    characters after it."""
    by_machine: dict[str, Fingerprint] = {}
    for fingerprint in sorted(fingerprints, key=lambda f: f.node):
        by_machine.setdefault(fingerprint.machine(), fingerprint)
    names = {machine: name_of(fingerprint) for machine, fingerprint in by_machine.items()}
    counts: dict[str, int] = defaultdict(int)
    for name in names.values():
        counts[name] += 1
    return {
        machine: name if counts[name] == 1 else f"{name}-{machine[:4]}" for machine, name in names.items()
    }


def name_of(fingerprint: Fingerprint) -> str:
    """The GPU model (``a100``, ``h100-sxm``, with ``x4`` where the benchmark saw four), else the CPU's
    (``cpu-epyc-9654-2c``, and ``-quota0.8`` where a CPU quota capped it)."""
    if fingerprint.device == "cuda" and fingerprint.gpu_name:
        name = _words(fingerprint.gpu_name)
        return name + (f"x{fingerprint.gpu_count}" if fingerprint.gpu_count > 1 else "")
    name = f"cpu-{_words(fingerprint.cpu_model)}-{fingerprint.cpu_cores}c"
    return name + ("" if fingerprint.cpu_quota is None else f"-quota{fingerprint.cpu_quota:g}")


def labelled(machine: str, names: Mapping[str, str]) -> str:
    """``v100 (a7abe679)``: the name with the start of the hash, for lines that must name it exactly."""
    name = names.get(machine)
    return machine if name is None else f"{name} ({machine[:8]})"


def partitions_of(fingerprints: Iterable[Fingerprint]) -> dict[str, list[str]]:
    """Each machine hash's partitions, in name order."""
    found: dict[str, set[str]] = defaultdict(set)
    for fingerprint in fingerprints:
        if fingerprint.partition:
            found[fingerprint.machine()].add(fingerprint.partition)
    return {machine: sorted(partitions) for machine, partitions in found.items()}


def resolve(word: str, fingerprints: Sequence[Fingerprint], latest: Mapping[str, str]) -> str:
    """The machine hash ``word`` means: a hash (or its start, eight characters or more), a machine's name,
    or a partition (``latest``: each partition's machine measured last, `Store.latest_machines`)."""
    names = machine_names(fingerprints)
    if word in names:
        return word
    by_name = {name: machine for machine, name in names.items()}
    if word in by_name:
        return by_name[word]
    if word in latest:
        return latest[word]
    started = [machine for machine in names if len(word) >= 8 and machine.startswith(word)]
    if len(started) == 1:
        return started[0]
    if _HASH.fullmatch(word):
        return word  # a machine whose fingerprints are gone, its versions kept
    known = sorted({*by_name, *latest})
    raise UnknownMachine(
        f"no machine, partition or hash '{word}': known are {', '.join(known) or 'none (nothing measured)'}"
    )


def _words(text: str) -> str:
    """A model string as lower-case words joined by dashes, without vendor words and clock speeds."""
    words = _CLOCK.sub("", text.lower()).replace("(r)", " ").replace("(tm)", " ").split()
    kept = [word for word in words if word not in _VENDOR_WORDS and not word.endswith("-core")]
    return "-".join(kept) or "unknown"
