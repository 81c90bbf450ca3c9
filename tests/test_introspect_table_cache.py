"""Torchvision models' layer tables kept on disk: found again only as they were made, never a factory's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.introspect import table_cache
from advisor.introspect.run import clear_cache, introspect
from advisor.introspect.table_cache import keep_tables_in, table_folder, table_key

SHAPE = (3, 32, 32)
KWARGS = {"num_classes": 10}


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    clear_cache()
    keep_tables_in(tmp_path / "tables")
    yield tmp_path / "tables"
    keep_tables_in(None)
    clear_cache()


def _never_built(*_: object) -> None:
    raise AssertionError("the table was introspected again")


def test_a_kept_table_is_read_back_instead_of_introspected(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = introspect("resnet18", SHAPE, KWARGS, allow_factories=False)
    assert len(list(folder.glob("*.json"))) == 1
    clear_cache()
    monkeypatch.setattr("advisor.introspect.run._built", _never_built)
    assert introspect("resnet18", SHAPE, KWARGS, allow_factories=False) == made


def test_a_file_that_does_not_validate_is_introspected_again(folder: Path) -> None:
    made = introspect("squeezenet1_1", SHAPE, KWARGS, allow_factories=False)
    (kept,) = folder.glob("*.json")
    kept.write_text(kept.read_text()[:-40])
    clear_cache()
    assert introspect("squeezenet1_1", SHAPE, KWARGS, allow_factories=False) == made
    assert kept.read_text() == made.model_dump_json()


def test_a_factory_is_never_kept(folder: Path) -> None:
    introspect("tests.factories.cnn:build", SHAPE, {"width": 8, "depth": 2}, allow_factories=True)
    assert not folder.exists()


def test_a_folder_that_cannot_be_written_only_costs_the_time(tmp_path: Path) -> None:
    (tmp_path / "tables").write_text("a file where the folder should be")
    clear_cache()
    keep_tables_in(tmp_path / "tables")
    try:
        table = introspect("squeezenet1_1", SHAPE, KWARGS, allow_factories=False)
    finally:
        keep_tables_in(None)
        clear_cache()
    assert table.reference == "squeezenet1_1"
    assert [path.name for path in tmp_path.iterdir()] == ["tables"]


def test_the_key_changes_with_the_model_the_shape_torch_and_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    key = table_key("resnet18", '{"num_classes": 10}', SHAPE)
    assert key == table_key("resnet18", '{"num_classes": 10}', SHAPE)
    others = {
        table_key("resnet34", '{"num_classes": 10}', SHAPE),
        table_key("resnet18", '{"num_classes": 100}', SHAPE),
        table_key("resnet18", '{"num_classes": 10}', (3, 64, 64)),
    }
    monkeypatch.setattr(table_cache, "_version", lambda name: "9.9" if name == "torch" else "0")
    others.add(table_key("resnet18", '{"num_classes": 10}', SHAPE))
    monkeypatch.undo()
    monkeypatch.setattr(table_cache, "_code_digest", lambda: "edited")
    others.add(table_key("resnet18", '{"num_classes": 10}', SHAPE))
    assert key not in others and len(others) == 5


def test_every_command_keeps_tables_in_the_settings_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ADVISOR_STATE_DIR", str(tmp_path))
    clear_cache()
    try:
        assert main(["bench", "plan", "--quick", "--device", "cpu"]) == 0
        assert table_folder() == tmp_path / "tables"
    finally:
        keep_tables_in(None)
        clear_cache()
    assert "quick plan on cpu" in capsys.readouterr().out
    assert sorted(tmp_path.iterdir()) == [tmp_path / "tables"]
    assert len(list((tmp_path / "tables").glob("*.json"))) >= 3
