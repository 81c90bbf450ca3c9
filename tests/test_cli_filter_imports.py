"""The cli_filter's helper runs in every plain sbatch: it loads the standard library and the advisor's
fast path only (the figures: benchmarks/README.md, `daemon_latency.py --only filter`). A heavy import that
comes back fails here, by name, rather than as a few milliseconds on a noisy benchmark."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from advisor.cli_filter import install

NOT_IN_THE_HELPER = (
    "pydantic",
    "rich",
    "torch",
    "numpy",
    "sqlite_utils",
    "argparse",
    "http",
    "ssl",
    "email",
    "subprocess",
    "tempfile",
    "dataclasses",
    "inspect",
    "advisor.submit",
    "advisor.factory_table",
    "advisor.daemon.munge",
)
"""The models' and the tables' packages, the service's, argparse (only `cli-filter install` parses),
http.client and what it loads (ssl, email: the transport speaks HTTP itself), tempfile (importlib.resources
loads it: package data is not read here), dataclasses and the inspect it loads (the records on this path
are NamedTuples), and subprocess with the modules that need it: advise-submit's
own (sbatch), the factory child's, MUNGE's (the service over TCP)."""


def _loaded(tmp_path: Path, *words: str) -> tuple[list[str], str, str]:
    """What the helper answered with ``words`` (no daemon: it fails open), which of `NOT_IN_THE_HELPER` it
    loaded, and what it said."""
    probe = (
        "import sys\n"
        "from advisor.cli_filter import main\n"
        f"main({list(words)!r})\n"
        f"heavy = {NOT_IN_THE_HELPER!r}\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("ADVISOR_")}
    env["ADVISOR_SOCKET"] = str(tmp_path / "absent.sock")
    result = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    *answer, loaded = result.stdout.splitlines()
    return answer, loaded, result.stderr


def test_the_helper_asks_with_the_standard_library_only(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --time=01:00:00\npython train.py\n")
    options = tmp_path / "options.json"
    options.write_text(json.dumps({"argv": [str(script)], "partition": "a100"}))
    answer, loaded, said = _loaded(tmp_path, "pre", str(options))
    assert answer == ["#end"] and "did not answer" in said, "asked, failed open (no daemon), no change"
    assert loaded == "[]"


def test_the_helper_reports_a_job_with_the_standard_library_only(tmp_path: Path) -> None:
    answer, loaded, said = _loaded(tmp_path, "post", "ab12", "7", "1")
    assert answer == [] and "not recorded" in said, "asked, failed open"
    assert loaded == "[]"


def test_the_lua_starts_the_advisors_helper_bare(tmp_path: Path) -> None:
    """``python -I -S``: no site (the .pth files, the packages' own set-up), and no PYTHON* variable of the
    user's reaches it: a PYTHONPATH with another ``advisor`` in it is not read."""
    lua = install(tmp_path, None, timeout_s=2).read_text(encoding="utf-8")
    helper = re.search(r'^local HELPER = "(.*)"$', lua, re.M)
    assert helper is not None and f"{sys.executable} -I -S -c " in helper[1], lua
    decoy = tmp_path / "decoy" / "advisor"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise SystemExit('the user's advisor was imported')\n")
    options = tmp_path / "options.json"
    options.write_text(json.dumps({"argv": [str(tmp_path / "job.sh")], "test-only": "set"}))
    (tmp_path / "job.sh").write_text("#!/bin/sh\n#SBATCH --time=01:00:00\ntrue\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(decoy.parent), "ADVISOR_SOCKET": str(tmp_path / "x")}
    result = subprocess.run(
        ["/bin/sh", "-c", f"{helper[1]} pre {options}"], env=env, capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stdout) == (0, "#end\n"), result.stderr
    assert "did not answer" in result.stderr and "the user's advisor" not in result.stderr
