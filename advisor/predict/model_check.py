"""A version file without a checksum, loaded whole in a child process (``python -P -m
advisor.predict.model_check``) before any serving process trusts it.

Versions trained before checksums were kept have none to compare, and xgboost's native parser crashes its
process on some corrupted boosters (a segfault) instead of raising: so the first load of such a file is
this child's. The bytes come on stdin; it prints `READY` once its imports are done (so a child that could
not even start blames no file), and exit 0 says they parse and predict. The address space is capped before
anything is parsed, so a corrupted size field costs the child, not the host.
"""

from __future__ import annotations

import resource
import sys

READY = "ready"
MEMORY_BYTES = 4 << 30
"""Eight times what loading a version takes (about 0.5 GiB of address space, most of it the imports)."""


def main() -> int:
    data = sys.stdin.buffer.read()
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    from advisor.predict.machine import MachineModel

    print(READY, flush=True)
    MachineModel.model_validate_json(data).exercise()
    return 0


if __name__ == "__main__":
    sys.exit(main())
