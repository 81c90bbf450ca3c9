"""Trained predictors to corrupt: copies of one trained store, and the corruptions a version file meets.

Loading runs in a child process (`load_in_child`), so a crash of xgboost's native parser shows as the
child's exit status (-11, a segfault) instead of ending the test run.
"""

from __future__ import annotations

import base64
import json
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from advisor.store import Store

Corruption = Callable[[bytes], bytes]
PARTITIONS = ("a100", "v100", "t4")
CHILD = """
import json, logging, sys
from pathlib import Path
from advisor.introspect import LayerTable
from advisor.predict.service import Predictors, StepQuestion, predict
from advisor.store import Store

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
root = Path(sys.argv[1])
store = Store.open(root / "advisor.db")
table = LayerTable.model_validate_json((root / "table.json").read_text())
predictors = Predictors.load(store)
answers = {}
for partition in sys.argv[2:]:
    found = predict(predictors, StepQuestion(partition, table, 8, False, False), [])
    answers[partition] = {"machine": found.machine, "confidence": found.confidence,
                          "evidence": found.evidence, "scaled_from": found.scaled_from,
                          "step_s": found.step_s}
print(json.dumps({"loaded": sorted(predictors.models), "answers": answers}))
"""


def copy_trained(source: Path, target: Path) -> Store:
    """``source``'s database and version files under ``target``, the registry pointing at the copies."""
    shutil.copytree(source, target)
    with sqlite3.connect(target / "advisor.db") as db:
        db.execute("UPDATE model_versions SET path = replace(path, ?, ?)", [str(source), str(target)])
    return Store.open(target / "advisor.db")


def active_file(store: Store, partition: str) -> tuple[str, Path]:
    """The machine of ``partition`` and its active version file."""
    machine = store.latest_machines()[partition]
    (path,) = store.db.execute(
        "SELECT path FROM model_versions WHERE machine = ? AND active = 1", [machine]
    ).fetchone()
    return machine, Path(path)


def load_in_child(root: Path) -> subprocess.CompletedProcess[str]:
    """Every partition predicted from the store at ``root`` (and ``root/table.json``), in a child."""
    argv = [sys.executable, "-c", CHILD, str(root), *PARTITIONS]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def in_booster(field: str, seed: int) -> Corruption:
    """Four bytes of one booster changed, the file still valid JSON: what reaches xgboost's parser."""

    def corrupt(data: bytes) -> bytes:
        rng = random.Random(seed)
        document = json.loads(data)
        raw = bytearray(base64.b64decode(document[field]))
        for _ in range(4):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return json.dumps({**document, field: base64.b64encode(bytes(raw)).decode()}).encode()

    return corrupt


def truncated(seed: int) -> Corruption:
    return lambda data: data[: random.Random(seed).randrange(len(data))]


def flipped(seed: int) -> Corruption:
    """Eight bytes of the file changed at random offsets."""

    def corrupt(data: bytes) -> bytes:
        rng = random.Random(seed)
        changed = bytearray(data)
        for _ in range(8):
            changed[rng.randrange(len(changed))] = rng.randrange(256)
        return bytes(changed)

    return corrupt


def fixed(content: bytes) -> Corruption:
    return lambda _data: content


CORRUPTIONS: dict[str, Corruption] = {
    **{f"layer-booster-{seed}": in_booster("layer_booster", seed) for seed in range(42, 47)},
    **{f"step-booster-{seed}": in_booster("step_booster", seed) for seed in range(42, 47)},
    **{f"matrix-booster-{seed}": in_booster("matrix_booster", seed) for seed in range(42, 45)},
    **{f"truncated-{seed}": truncated(seed) for seed in range(5)},
    **{f"flipped-{seed}": flipped(seed) for seed in range(5)},
    "empty": fixed(b""),
    "garbage": fixed(random.Random(46).randbytes(4096)),
    "json-junk": fixed(b'{"machine": "x", "layer_booster": 1}'),
    "json-list": fixed(b"[]"),
}
SEGFAULTING = in_booster("layer_booster", 42)
"""Crashed xgboost 3's parser (exit -11) when this was written; any failure to load serves the tests."""
