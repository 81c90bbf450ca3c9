"""Version files, trusted only as they were written.

A corrupted booster does not always make xgboost raise: some crash its process (a segfault), and that
process was the daemon, at its first request after every start. So each version's sha256 is recorded with
it (`ModelRegistry`) and compared before any of its bytes are parsed; a version trained before digests were
kept is first loaded whole in a child process (`advisor.predict.model_check`), and its digest recorded once
that child survives. A file that fails is moved aside (never deleted: it is evidence) and its version
marked, which the log and ``/health`` name; only its machine loses its predictor, and its partitions are
predicted as if never benchmarked (scaled from another machine, at low confidence).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from advisor.predict.boosters import booster_width
from advisor.predict.layout import current_layout, layout_problem, width_problem
from advisor.predict.machine import MachineModel
from advisor.predict.model_check import READY
from advisor.store import ModelRegistry, ModelVersionRow, Store

CHECK_TIMEOUT_S = 60.0
"""A check process that takes longer is killed, and its version quarantined (loading takes about 1 s)."""
QUARANTINE_SUFFIX = ".quarantined"
log = logging.getLogger("advisor.predict")


class ModelFileError(Exception):
    """A version file that must not be loaded; the message says why, as ``/health`` shows it."""


class UncheckedError(Exception):
    """A check process that could not start: no fault of the file, which is neither loaded nor quarantined."""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_version_file(path: Path, text: str) -> str:
    """Written whole or not at all (temporary name, fsync, rename over); returns the sha256 to record."""
    data = text.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    temporary.replace(path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return digest(data)


def checked_model(store: Store, row: ModelVersionRow) -> MachineModel | None:
    """The version of registry ``row``, or None where its file failed a check (then it is quarantined) or
    was fitted with another feature layout than this advisor's (then it waits for a retrain, unmoved)."""
    try:
        expected = row.sha256 or _first_check(store, row)
        model = _verified(str(row.path), expected)
    except ModelFileError as error:
        quarantine(store, row, str(error))
        return None
    except UncheckedError as error:
        log.error("model file %s not loaded: %s", row.path, error)
        return None
    problem = layout_refusal(model)
    if problem is not None:
        log.error(
            "model file %s (the predictor of %s, version %s) is not served: %s; its partitions are predicted "
            "as if never benchmarked until `advisor models train` fits a new version",
            row.path,
            row.machine,
            row.version,
            problem,
        )
        return None
    return model


def layout_refusal(model: MachineModel) -> str | None:
    """Why ``model`` cannot be served with this advisor's features, or None where it can."""
    current = current_layout()
    if model.layout is not None:
        return layout_problem(model.layout, current, op_sum=model.op_sum is not None)
    widths = (booster_width(model.layer_booster), booster_width(model.step_booster))
    return width_problem(widths, current)


@lru_cache(maxsize=64)
def _verified(path: str, expected: str) -> MachineModel:
    """A version file never changes once written (a retrain writes a new one): path and digest are a key."""
    data = _read(Path(path))
    if digest(data) != expected:
        raise ModelFileError("failed its checksum")
    try:
        return MachineModel.model_validate_json(data)
    except ValueError:
        raise ModelFileError("matches its checksum but is not a predictor this advisor reads") from None


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise ModelFileError(f"could not be read ({error.strerror or type(error).__name__})") from None


def _first_check(store: Store, row: ModelVersionRow) -> str:
    """The digest of a version trained before digests were kept, once a check process loaded it whole."""
    data = _read(row.path)
    # -P: nothing from the working directory is imported; the daemon's own environment is.
    argv = [sys.executable, "-P", "-m", "advisor.predict.model_check"]
    try:
        result = subprocess.run(argv, input=data, capture_output=True, timeout=CHECK_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        if not (error.stdout or b"").startswith(READY.encode()):
            raise UncheckedError(f"its check process did not start within {CHECK_TIMEOUT_S:g} s") from None
        raise ModelFileError(
            f"has no checksum and did not load within {CHECK_TIMEOUT_S:g} s in a check process"
        ) from None
    if not result.stdout.startswith(READY.encode()):
        tail = result.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise UncheckedError(f"its check process did not start: {' '.join(tail)}")
    if result.returncode != 0:
        code = result.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        tail = result.stderr.decode(errors="replace").strip().splitlines()[-1:]
        log.error("model file %s failed its check process (%s): %s", row.path, how, " ".join(tail))
        raise ModelFileError(f"has no checksum and did not load in a check process ({how})")
    found = digest(data)
    try:
        ModelRegistry(store).record_sha256(row.machine, row.version, found)
    except sqlite3.Error as error:
        log.warning("model file %s loads, but its checksum was not recorded: %s", row.path, error)
    return found


def quarantine(store: Store, row: ModelVersionRow, why: str) -> None:
    """Moves the file aside (kept for a look, never deleted) and marks its version in the registry."""
    machine, version, path = row.machine, row.version, row.path
    where = move_aside(path)
    log.error(
        "model file %s (the predictor of %s, version %d) %s: quarantined, %s; its partitions are predicted "
        "as if never benchmarked until `advisor models train` writes a new version",
        path,
        machine,
        version,
        why,
        where,
    )
    try:
        ModelRegistry(store).quarantine(machine, version, why)
    except sqlite3.Error as error:
        log.error("the quarantine of %s version %d was not recorded: %s", machine, version, error)


def move_aside(path: Path) -> str:
    """``path`` renamed with `QUARANTINE_SUFFIX` (kept for a look, never deleted); says where it went."""
    aside = path.with_name(path.name + QUARANTINE_SUFFIX)
    try:
        path.replace(aside)
    except FileNotFoundError:
        return "no file to move"
    except OSError as error:
        return f"left in place ({error.strerror})"
    return f"moved to {aside}"
