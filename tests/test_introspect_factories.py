"""User factories, the security boundary, and the one clear error for what cannot be introspected."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from advisor.factory_table import factory_table, named_factory, search_path
from advisor.introspect import IntrospectionError, LayerKind, LayerTable
from advisor.introspect.run import introspect

from .factories.shared_folder import package, plant

FACTORY = "tests.factories.cnn:build"


def test_factory_with_keyword_arguments() -> None:
    table = introspect(
        FACTORY, (3, 32, 32), {"width": 16, "depth": 3, "num_classes": 7}, allow_factories=True
    )
    convs = [layer for layer in table.layers if layer.kind is LayerKind.CONV]
    assert len(convs) == 1 + 2 * 3
    assert sum(layer.depthwise for layer in convs) == 3
    assert table.layers[-1].outputs[0].at_batch(4) == (4, 7)
    assert table.totals.parameters == sum(layer.parameters for layer in table.layers)


def test_forward_with_input_dependent_control_flow() -> None:
    small = introspect("tests.factories.cnn:build_until_small", (3, 16, 16), allow_factories=True)
    large = introspect("tests.factories.cnn:build_until_small", (3, 64, 64), allow_factories=True)
    downsamples = [[layer for layer in t.layers if layer.name == "down"] for t in (small, large)]
    assert [len(d) for d in downsamples] == [2, 4]
    assert [layer.parameters for layer in downsamples[1]] == [downsamples[1][0].parameters, 0, 0, 0]
    assert {layer.op for layer in large.layers if layer.name == ""} >= {"relu", "add", "mean"}


def test_daemon_refuses_factories_before_importing_them() -> None:
    with pytest.raises(IntrospectionError, match="only torchvision model names are introspected here"):
        introspect("tests.factories.not_imported_ever:build", allow_factories=False)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("resnet5000", "'resnet5000' is not a torchvision classification model"),
        ("fasterrcnn_resnet50_fpn", "is not a torchvision classification model"),
        ("tests.factories.missing:build", "cannot import module 'tests.factories.missing'"),
        ("tests.factories.cnn:missing", "tests.factories.cnn has no attribute 'missing'"),
        ("tests.factories.cnn", "is not a torchvision classification model"),
        ("tests.factories.cnn:", "is not of the form package.module:factory"),
        (
            "tests.factories.cnn:broken",
            "building 'tests.factories.cnn:broken' failed: RuntimeError: cannot build",
        ),
        ("tests.factories.cnn:not_a_module", "returned dict, not a torch.nn.Module"),
    ],
)
def test_references_that_do_not_resolve(reference: str, message: str) -> None:
    with pytest.raises(IntrospectionError, match=message.replace("(", r"\(")):
        introspect(reference, (3, 32, 32), allow_factories=True)


def test_factory_arguments_it_does_not_take() -> None:
    with pytest.raises(IntrospectionError, match="unexpected keyword argument 'heads'"):
        introspect(FACTORY, (3, 32, 32), {"heads": 4}, allow_factories=True)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize(
    ("reference", "shape", "message"),
    [
        ("alexnet", (3, 32, 32), "'alexnet' rejects input shape 3x32x32: RuntimeError: .*too small"),
        ("inception_v3", (3, 64, 64), "'inception_v3' rejects input shape 3x64x64: RuntimeError"),
        ("resnet18", (1, 224, 224), "'resnet18' rejects input shape 1x224x224: RuntimeError"),
        ("tests.factories.cnn:build_value_dependent", (3, 8, 8), "rejects input shape 3x8x8: .*meta"),
    ],
)
def test_shapes_the_model_rejects(reference: str, shape: tuple[int, int, int], message: str) -> None:
    with pytest.raises(IntrospectionError, match=message):
        introspect(reference, shape, allow_factories=True)


@pytest.mark.parametrize("shape", [(3, 0, 224), (3, 224), (3, 224, 10**6)])
def test_absurd_input_shapes(shape: tuple[int, int, int]) -> None:
    with pytest.raises(IntrospectionError, match="input shape must be three positive sizes"):
        introspect("resnet18", shape, allow_factories=False)


def test_arguments_must_be_json() -> None:
    with pytest.raises(IntrospectionError, match="model arguments must be JSON values"):
        introspect("resnet18", kwargs={"norm_layer": object()}, allow_factories=False)  # type: ignore[dict-item]


def test_a_torch_error_reaches_the_user_as_one_line_without_its_cpp_stack_trace() -> None:
    from advisor.introspect.errors import summary

    trace = "shape '[2, 3]' is invalid\nException raised from infer_size at aten/src/ATen/InferSize.h:1\n"
    error = RuntimeError(trace + "frame #0: c10::Error::Error(...)\n" * 40)
    assert summary(error) == "RuntimeError: shape '[2, 3]' is invalid"
    assert summary(RuntimeError("x" * 1000)).endswith("...") and len(summary(RuntimeError("x" * 1000))) == 303


DESCRIBED = (
    "#!/bin/sh\n#SBATCH --partition=t4\n"
    "#ADVISOR --model=mypkg.net:build --input-shape=3x32x32 --global-batch=64 --steps=10\nhostname\n"
)


@pytest.mark.parametrize("found_by", ["working directory", "PYTHONPATH"])
def test_the_factory_child_runs_nothing_planted_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, found_by: str
) -> None:
    """The user's package is found where the user keeps it (the working directory, PYTHONPATH); a json.py
    beside it is not the standard library."""
    shared = tmp_path / "shared"
    shared.mkdir()
    marker = plant(shared)
    if found_by == "working directory":
        package(shared)
    else:
        monkeypatch.setenv("PYTHONPATH", str(package(tmp_path / "home")))
    monkeypatch.chdir(shared)
    table = factory_table(DESCRIBED, "job.sh", [])
    assert not marker.exists(), marker.read_text()
    assert table is not None and LayerTable.model_validate(table).layers[-1].outputs[0].at_batch(2) == (2, 10)


def test_the_working_directory_is_searched_only_where_it_holds_the_factorys_package(tmp_path: Path) -> None:
    assert search_path("mypkg.net:build", {}, tmp_path) == []
    assert search_path("mypkg.net:build", {}, package(tmp_path)) == [str(tmp_path)]
    assert search_path("x:y", {"PYTHONPATH": f"/a{os.pathsep}{os.pathsep}b"}, tmp_path) == [
        "/a",
        str(tmp_path / "b"),
    ]


def test_a_factory_is_told_from_a_torchvision_name() -> None:
    assert named_factory(DESCRIBED, "job.sh", []) == "mypkg.net:build"
    assert named_factory(DESCRIBED.replace("mypkg.net:build", "resnet18"), "job.sh", []) is None


def test_no_source_honours_hugging_face_remote_code() -> None:
    """``trust_remote_code`` runs a model repository's code: nothing in the advisor may set it."""
    sources = Path(__file__).resolve().parent.parent / "advisor"
    for path in sources.rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            assert "trust_remote_code" not in line or "trust_remote_code=False" in line, f"{path}:{number}"
