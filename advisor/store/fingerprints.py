"""The ``fingerprints`` table: each machine a measurement was taken on, by its fingerprint's key."""

from __future__ import annotations

from advisor.frozen import Frozen
from advisor.records import Fingerprint
from advisor.store.table import Table


class FingerprintRow(Frozen):
    """A `Fingerprint` as stored, with its key and machine hash as columns (the measurement tables and the
    machine queries join on them). Its fields repeat the record's instead of extending it: these two columns
    would shadow the record's `key()` (every record's identity) and `machine()` methods; and a field the
    record gains becomes a column only once added here (`of` refuses one this row lacks)."""

    key: str
    machine: str
    partition: str | None
    node: str
    device: str
    gpu_name: str | None
    gpu_count: int
    gpu_memory_mb: int | None
    driver: str | None
    cuda: str | None
    cudnn: str | None
    cpu_model: str
    cpu_cores: int
    torch: str
    cpu_quota: float | None = None

    @classmethod
    def of(cls, fingerprint: Fingerprint) -> FingerprintRow:
        fields = fingerprint.model_dump()
        return cls(key=fingerprint.key(), machine=fingerprint.machine(), **fields)

    def fingerprint(self) -> Fingerprint:
        return Fingerprint.model_validate(self.model_dump(exclude={"key", "machine"}))


FINGERPRINTS = Table("fingerprints", FingerprintRow, "key")
