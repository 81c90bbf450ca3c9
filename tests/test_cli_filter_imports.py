"""The cli_filter's helper runs in every plain sbatch: it loads the standard library and the advisor's
fast path only (the figures: benchmarks/README.md, `daemon_latency.py --only filter`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

NOT_IN_THE_HELPER = ("pydantic", "rich", "torch", "numpy", "sqlite_utils", "argparse")
"""The models' and the tables' packages, the service's, and argparse (only `cli-filter install` parses)."""


def test_the_helper_asks_with_the_standard_library_only(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --time=01:00:00\npython train.py\n")
    options = tmp_path / "options.json"
    options.write_text(json.dumps({"argv": [str(script)], "partition": "a100"}))
    probe = (
        "import sys\n"
        "from advisor.cli_filter import main\n"
        f"main(['pre', {str(options)!r}])\n"
        f"print(sorted({{name.split('.')[0] for name in sys.modules}} & set({NOT_IN_THE_HELPER!r})))\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("ADVISOR_")}
    env["ADVISOR_SOCKET"] = str(tmp_path / "absent.sock")
    result = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    answer, loaded = result.stdout.splitlines()[-2:]
    assert answer == "#end", "asked, failed open (no daemon), answered no change"
    assert "did not answer" in result.stderr
    assert loaded == "[]"
