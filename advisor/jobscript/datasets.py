"""The datasets a training command may name, by the word its data path or dataset name contains: the
shipped table (``advisor/data/datasets.toml``) and a site's own in the same shape (settings: ``datasets``),
whose entries win. A bad site table is refused with its ``FILE:LINE``, like a policy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated

from pydantic import Field, RootModel, StringConstraints

from advisor.frozen import Frozen
from advisor.tomlfile import TomlFileError, load_model, parse_model

_SHIPPED = "advisor/data/datasets.toml"
DatasetName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]*$")]
"""Lower case: it is looked for in a lowered path (``/data/ImageNet/train`` names ``imagenet``)."""
_SEPARATORS = str.maketrans("", "", "-_")


class Dataset(Frozen):
    samples: Annotated[int, Field(ge=1, le=2**40)]
    """Training samples (images, documents, sentence pairs) per epoch."""
    classes: Annotated[int, Field(ge=1, le=10**7)] | None = None
    """A classification dataset's classes (a language modelling corpus has none)."""
    side: Annotated[int, Field(ge=1, le=65536)] | None = None
    """An image dataset's input side as the common recipes train at (pixels)."""
    tokens: Annotated[int, Field(ge=1, le=2**50)] | None = None
    """A text corpus's training tokens per epoch (GPT-2's tokenizer): a causal LM packs them into
    sequences of its length."""


class DatasetTable(RootModel[dict[DatasetName, Dataset]]):
    pass


class DatasetsFileError(TomlFileError):
    """A site's datasets table that cannot be used."""


@cache
def shipped_datasets() -> Mapping[str, Dataset]:
    text = (resources.files("advisor") / "data" / "datasets.toml").read_text(encoding="utf-8")
    return parse_model(text, _SHIPPED, DatasetTable, DatasetsFileError).root


def load_datasets(site: Path | None) -> Mapping[str, Dataset]:
    """The shipped table with the site's file (if any) over it; raises `DatasetsFileError`."""
    if site is None:
        return shipped_datasets()
    return {**shipped_datasets(), **load_model(site, DatasetTable, DatasetsFileError).root}


def dataset_in(words: Iterable[str | None], table: Mapping[str, Dataset]) -> Dataset | None:
    """The dataset the first word that names one names: the longest table name it contains, lowered and
    ``-``/``_`` aside, as folders and hub names spell them (``cifar-10-batches-py`` names ``cifar10``,
    ``/data/tiny_imagenet`` ``tiny-imagenet``, not ``imagenet``)."""
    plain = {name: name.translate(_SEPARATORS) for name in table}
    names = sorted(table, key=lambda name: len(plain[name]), reverse=True)
    for word in words:
        lowered = (word or "").lower().translate(_SEPARATORS)
        found = next((name for name in names if lowered and plain[name] in lowered), None)
        if found is not None:
            return table[found]
    return None
