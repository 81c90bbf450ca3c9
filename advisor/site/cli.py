"""`advisor init-site DIR [--prefix ENV] [--force]`: the files an install needs besides the package (the
settings template, the policies, pip's constraints, the systemd units), written under DIR for the
environment at ENV. A file changed since init-site wrote it (an edited policy) is kept unless --force."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path, PurePosixPath

from rich.console import Console

from advisor import __version__
from advisor.settings.validated import Settings
from advisor.site.layout import CONFIG_DIR, PrefixError, checked_prefix, site_files

FILE_MODE = 0o644
"""Everything here is read by every user (the policy and settings too) and written by root alone."""
RECORD = CONFIG_DIR / "init-site.json"
"""The digest of each file as init-site last wrote it: an upgrade replaces what nobody has changed."""


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings: Settings) -> None:
    parser = commands.add_parser(
        "init-site",
        help="write the settings template, the policies, pip's constraints and the systemd units",
        description=__doc__,
    )
    _arguments(parser)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "root",
        type=Path,
        metavar="DIR",
        help="where the host's / is: / on the service host, or a folder to review or package them",
    )
    parser.add_argument(
        "--prefix",
        metavar="ENV",
        default=sys.prefix,
        help="the environment whose bin/advisor the units run (default: this one, %(default)s)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace files changed since init-site wrote them (an edited policy too)",
    )
    parser.set_defaults(handler=_init_site)


def _init_site(args: argparse.Namespace, _console: Console) -> int:
    # Plain lines, never folded: paths to copy from.
    try:
        prefix = checked_prefix(args.prefix)
    except PrefixError as error:
        print(f"advisor init-site: error: {error}", file=sys.stderr)
        return 2
    record_path = args.root / RECORD.relative_to("/")
    record = _read_record(record_path)
    outcomes = []
    for file in site_files(_shipped, prefix):
        target = args.root / file.path.relative_to("/")
        outcome = write(target, file.text, record.get(str(file.path)), force=args.force)
        if outcome != "kept":
            record[str(file.path)] = _digest(file.text)
        outcomes.append(outcome)
        print(f"{outcome:9} {target}: {file.what}")
    record_path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if "kept" in outcomes:
        print("kept: changed here since init-site wrote it; --force replaces it, and init-site with")
        print("      another DIR writes the shipped files there, to compare")
    print(_next_steps(prefix))
    return 0


def _shipped(name: str) -> str:
    return (resources.files("advisor.site") / "files" / name).read_text(encoding="utf-8")


def write(target: Path, text: str, written: str | None, *, force: bool) -> str:
    """Writes one file: `wrote` where it is missing, or still what init-site wrote (`written`, its
    digest) and now ships otherwise; `unchanged`; `kept` where someone changed it, unless `force`."""
    if target.is_file() and target.read_text(encoding="utf-8") == text:
        return "unchanged"
    if target.exists() and not force and (written is None or _digest(target.read_text("utf-8")) != written):
        return "kept"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    target.chmod(FILE_MODE)
    return "wrote"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _read_record(path: Path) -> dict[str, str]:
    """What init-site wrote last time, by path: a file still as written is the shipped one, not an edit."""
    if not path.is_file():
        return {}
    record = json.loads(path.read_text(encoding="utf-8"))
    return {str(key): str(value) for key, value in record.items()} if isinstance(record, dict) else {}


def _next_steps(prefix: PurePosixPath) -> str:
    wheel = f"advisor-{__version__}-py3-none-any.whl"
    return (
        "next, on the host (docs/admin-guide.md):\n"
        f"  {prefix}/bin/pip install -c {CONFIG_DIR}/constraints.txt '{wheel}[service]'\n"
        f"  {prefix}/bin/advisor policy check {CONFIG_DIR}/policy.toml\n"
        "  systemctl daemon-reload && systemctl enable --now advisor.service advisor-bench.timer"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The command on its own (`python -m advisor.site.cli`), with no settings to read."""
    parser = argparse.ArgumentParser(prog="advisor init-site", description=__doc__)
    _arguments(parser)
    args = parser.parse_args(argv)
    return int(args.handler(args, Console()))


if __name__ == "__main__":
    sys.exit(main())
