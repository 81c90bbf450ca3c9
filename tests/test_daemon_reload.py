"""SIGHUP's policy reload: an edit made while a read is under way is read once that read ends (its
SIGHUP is not dropped), and only a read that is itself still going at the deadline is called stalled.

The holder is the real one on a real file; only its reload is held on a gate, as a slow file system
would hold it, so that the order of read, edit and signal is the test's to choose."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from advisor.daemon import reload as reload_module
from advisor.daemon.reload import PolicyReload
from advisor.policy import PolicyError, PolicyHolder


class HeldHolder(PolicyHolder):
    """Reads the file as the real holder does, and waits at a gate before the read or after it."""

    def __init__(self, path: Path, *, held_before: bool = False) -> None:
        self.held_before = held_before
        self.gate = threading.Event()
        self.gate.set()  # the first read, at start, goes straight through
        self.read = threading.Event()
        super().__init__(path)

    def reload(self) -> PolicyError | None:
        if self.held_before:
            self.gate.wait(timeout=30)
        error = super().reload()
        self.read.set()
        if not self.held_before:
            self.gate.wait(timeout=30)
        return error


def _policy(mode: str) -> str:
    return f'[users.alice]\nmode = "{mode}"\n'


async def _until(condition: object, seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not callable(condition) or not condition():
        assert asyncio.get_running_loop().time() < deadline, "never happened"
        await asyncio.sleep(0.01)


def _alice_mode(holder: PolicyHolder) -> str | None:
    return holder.current.users["alice"].mode


def test_an_edit_signalled_while_the_file_is_being_read_is_read_when_that_read_ends(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(_policy("advise"), encoding="utf-8")
    holder = HeldHolder(path)
    holder.read.clear()
    holder.gate.clear()

    async def scenario() -> None:
        reloading = PolicyReload(holder, asyncio.get_running_loop())
        path.write_text(_policy("rewrite"), encoding="utf-8")
        reloading.start()
        await _until(holder.read.is_set)  # the first read has seen "rewrite" and is still going
        path.write_text(_policy("off"), encoding="utf-8")
        reloading.start()
        reloading.start()  # two more SIGHUPs during the read: one more read, not two
        reads = reloading.reads
        holder.gate.set()
        await _until(lambda: not reloading.reading)
        assert reloading.reads == reads + 1

    asyncio.run(scenario())
    assert _alice_mode(holder) == "off"
    assert holder.last_error is None


def test_only_a_read_still_going_at_its_deadline_is_called_stalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reload_module, "RELOAD_DEADLINE_S", 0.3)
    path = tmp_path / "policy.toml"
    path.write_text(_policy("advise"), encoding="utf-8")
    holder = HeldHolder(path, held_before=True)  # a file system that hangs the read itself

    async def scenario() -> None:
        reloading = PolicyReload(holder, asyncio.get_running_loop())
        holder.gate.clear()
        path.write_text(_policy("rewrite"), encoding="utf-8")
        reloading.start()
        await asyncio.sleep(0.6)
        assert holder.last_error is not None and "not read within" in str(holder.last_error)
        holder.gate.set()
        await _until(lambda: not reloading.reading)
        assert holder.last_error is None, "the read that ended put its policy in force"
        reloading.start()  # a quick read whose deadline passes after it ended
        await _until(lambda: not reloading.reading)
        await asyncio.sleep(0.6)
        assert holder.last_error is None

    asyncio.run(scenario())
    assert _alice_mode(holder) == "rewrite"
