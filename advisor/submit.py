"""`advise-submit`: sbatch's drop-in replacement.

Until the daemon exists this is the fail-open path alone: the job goes to sbatch exactly as given, once,
with sbatch's own output and exit status. It never imports torch or xgboost.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        os.execvp("sbatch", ["sbatch", *arguments])
    except OSError as exc:
        print(f"advise-submit: error: cannot run sbatch: {exc.strerror}", file=sys.stderr)
        return 127
