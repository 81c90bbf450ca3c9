"""The database's tables, column by column: `Store` creates them (and adds what an older database lacks),
the ledgers (`advisor.store.ledgers`) and the measurements' rows fill them."""

from __future__ import annotations

from typing import Any

FINGERPRINT_COLUMNS: dict[str, Any] = {
    "key": str,
    "machine": str,
    "partition": str,
    "node": str,
    "device": str,
    "gpu_name": str,
    "gpu_count": int,
    "gpu_memory_mb": int,
    "driver": str,
    "cuda": str,
    "cudnn": str,
    "cpu_model": str,
    "cpu_cores": int,
    "torch": str,
    "cpu_quota": float,
}

COMMON_COLUMNS: dict[str, Any] = {
    "key": str,
    "run_id": str,
    "fingerprint": str,
    "machine": str,
    "measured_at": str,
    "median_s": float,
    "fits": int,
    "error": str,
}

STEP_COLUMNS: dict[str, Any] = {
    **COMMON_COLUMNS,
    "model": str,
    "input_size": int,
    "batch": int,
    "amp": int,
    "channels_last": int,
    "pinned": int,
    "workers": int,
    "arch_hash": str,
    "steps": int,
    "non_device_share": float,
    "peak_memory_bytes": int,
    "pace_ratio": float,
    "pace_s": float,
}

LAYER_COLUMNS: dict[str, Any] = {
    **COMMON_COLUMNS,
    "op": str,
    "in_channels": int,
    "out_channels": int,
    "kernel": str,
    "stride": str,
    "padding": str,
    "dilation": str,
    "groups": int,
    "depthwise": int,
    "grouped": int,
    "height": int,
    "width": int,
    "batch": int,
    "amp": int,
    "cudnn_benchmark": int,
    "pace_ratio": float,
    "pace_s": float,
}

ARCHITECTURE_COLUMNS: dict[str, Any] = {
    "architecture_hash": str,
    "model": str,
    "input_shape": str,
    "layer_table": str,
    "batches": str,
    "requests": int,
    "first_at": str,
    "last_at": str,
}

MODEL_COLUMNS: dict[str, Any] = {
    "machine": str,
    "version": int,
    "path": str,
    "created_at": str,
    "active": int,
    "step_rows": int,
    "layer_rows": int,
    "models": str,
    "measured_from": str,
    "measured_to": str,
    "heldout_mape": float,
    "sha256": str,  # the file's digest, written with it: a file that differs never reaches xgboost
    "quarantined": str,  # why the file was moved aside (its checksum failed, ...); None while it serves
}

ADVISED_COLUMNS: dict[str, Any] = {
    "job_id": int,
    "submitted_at": str,
    "user": str,
    "partition": str,
    "machine": str,
    "model_version": int,
    "confidence": str,
    "predicted_s": float,
    "predicted_p90_s": float,
    "predicted_p10_s": float,  # None where the prediction had no p10
    "calibration_key": str,  # the correction the job feeds: its machine, or scaled:PARTITION
    "architecture": str,  # the layer table's hash, for a correction per architecture
    "comparable_from_s": float,  # predicted start-up plus one epoch: a job ending sooner did not train
    "applied_correction": float,  # the calibration already in predicted_s; None before it was kept: none
    "time_limit_s": float,
    "slurm_start": str,
    "advisor_start": str,
    "state": str,
    "started_at": str,
    "elapsed_s": float,
    "ended_at": str,
}

AUDIT_COLUMNS: dict[str, Any] = {
    "request_id": str,
    "at": str,
    "uid": int,
    "user": str,
    "where": str,
    "argv": str,
    "request": str,
    "recommendation": str,
    "offered": int,
    "applied": int,
    "latency_ms": float,
    "job_id": int,
    "architecture_hash": str,  # the layer table advised on, which the job's advised_jobs row keeps
}

SCHEMA_VERSION = 6
"""``PRAGMA user_version`` of a database this version wrote. 1: before it was kept (the tables as they were);
2: the audit's ``offered`` column; 3: the ``architectures`` users submitted; 4: each model version's
``sha256`` and ``quarantined`` (`advisor.predict.model_files`); 5: each advised job's p10, calibration key,
architecture and start-up plus one epoch (`advisor.predict.calibration`); 6: the correction already in each
advised job's prediction. Each later version only adds
tables and columns, which `Store` does when it opens an older database, so an upgrade needs no step; an older
advisor refuses a newer database rather than write to tables it does not know."""
