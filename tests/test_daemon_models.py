"""A real daemon on the sandbox started with one corrupted predictor among three and a corrupted history
model: it starts, says from its first answer which files it quarantined (in /health and in its log, before
any request has loaded a model), and advises with the other two predictors and Tsafrir's rule."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, cast

import pytest

from advisor.api import AdviseRequest
from advisor.daemon.transport import UnixHTTPConnection
from advisor.history.features import past_rows
from advisor.history.predictor import train_model
from advisor.history.service import MODEL_FILE, save_model
from advisor.sandbox.cluster import Sandbox
from advisor.store import Store

from .daemon_support import SCRIPT, started_daemon
from .model_file_support import SEGFAULTING, active_file, truncated
from .test_history import synthetic
from .test_history_model_file import NOW, in_trees

RESNET50 = SCRIPT.replace("--model=resnet18", "--model=resnet50").format(name="corrupted")
"""Never measured whole, and of layer geometries never benchmarked: its prediction runs both boosters."""
CORRUPTED = {"segfaulting": (SEGFAULTING, in_trees(42)), "truncated": (truncated(0), truncated(0))}
"""The predictor's corruption and the history model's. Before checksums: the daemon died of a segfault at
the first request (exit -11, nothing logged); every request failed with a 422 that blamed its body ('body:
Invalid JSON: EOF while parsing'). Before the check at the start, /health said nothing until an /advise
loaded the predictors, and never named the history model."""


def ask(socket: Path, method: str, path: str, body: bytes | None = None) -> tuple[int, dict[str, object]]:
    connection = UnixHTTPConnection(socket, timeout=120)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        answer: dict[str, object] = json.loads(response.read())
        return response.status, answer
    finally:
        connection.close()


@pytest.mark.parametrize("corruption", sorted(CORRUPTED), ids=str)
def test_a_daemon_started_with_corrupted_model_files_names_them_at_once_and_advises_with_the_others(
    sandbox: Sandbox, tmp_path: Path, corruption: str
) -> None:
    daemon = started_daemon(sandbox, tmp_path / "daemon")
    daemon.stop()
    store = Store.open(daemon.root / "advisor.db")
    machine, path = active_file(store, "a100")
    predictor, history_model = CORRUPTED[corruption]
    path.write_bytes(predictor(path.read_bytes()))
    history = daemon.root / "models" / MODEL_FILE
    jobs = synthetic()
    model = train_model(*past_rows(jobs, until=jobs[-1].end_s))
    assert model is not None
    save_model(history, model, NOW)
    history.write_bytes(history_model(history.read_bytes()))
    daemon.start()
    try:
        _, health = ask(daemon.socket, "GET", "/health")
        degraded = health["degraded"]
        assert isinstance(degraded, list)
        assert any(
            line.startswith(f"the predictor of {machine} (version 1) failed its checksum: quarantined")
            for line in degraded
        ), degraded
        assert any(line.startswith(f"the history model {MODEL_FILE} ") for line in degraded), degraded
        log = (daemon.root / "daemon.log").read_text()
        assert f"model file {path} (the predictor of {machine}, version 1) failed its checksum" in log
        assert f"history model {history} " in log and ": quarantined, moved to" in log
        request = AdviseRequest.of(RESNET50.encode(), where="train.sbatch", sbatch_argv=["train.sbatch"])
        status, answer = ask(daemon.socket, "POST", "/advise", request.model_dump_json().encode())
        assert daemon.process is not None and daemon.process.poll() is None, (
            f"the daemon died ({daemon.process.poll() if daemon.process else None}): "
            + (daemon.root / "daemon.log").read_text()[-3000:]
        )
        assert status == 200, answer
        recommendation = cast(dict[str, Any], answer["recommendation"])
        by_partition = {e["candidate"]["partition"]: e for e in recommendation["candidates"]}
        assert {"a100", "v100", "t4"} <= set(by_partition), "every partition is still advised on"
        assert by_partition["a100"]["machine"] != machine and by_partition["a100"]["confidence"] == "low"
        for partition in ("v100", "t4"):
            own, _ = active_file(store, partition)
            assert by_partition[partition]["machine"] == own != machine
        with sqlite3.connect(daemon.root / "advisor.db") as db:
            (why,) = db.execute(
                "SELECT quarantined FROM model_versions WHERE machine = ? AND active = 1", [machine]
            ).fetchone()
        assert why == "failed its checksum"
    finally:
        if daemon.process is not None and daemon.process.poll() is None:
            daemon.stop()
