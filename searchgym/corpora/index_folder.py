"""What an index folder is: the metadata file that names its kind, read in one place.

The lowest module of the index code: :mod:`searchgym.corpora.bm25`, the dense retriever and
:mod:`searchgym.corpora.indexes` (which builds and loads any kind) read folders through it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from searchgym.error import ConfigError, DataFormatError

__all__ = ["INDEX_RETRIEVERS", "META_FILES", "index_meta", "is_index_folder"]

#: What ``searchgym index --retriever`` builds.
INDEX_RETRIEVERS = ("bm25", "rank-bm25", "dense", "dense-hnsw")
#: Metadata file name -> the kind of index it describes.
META_FILES = {"searchgym_bm25.json": "bm25", "searchgym_dense.json": "dense", "searchgym_shards.json": "shards"}


def is_index_folder(name: Any) -> bool:
    """Whether ``name`` is a path to a folder holding a saved index."""
    if not isinstance(name, (str, os.PathLike)):
        return False
    path = Path(name)
    return path.is_dir() and any((path / meta).is_file() for meta in META_FILES)


def index_meta(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata of the index folder ``path`` plus ``"kind"`` (``"bm25"`` or ``"dense"``)."""
    path = Path(path)
    for name, kind in META_FILES.items():
        if (path / name).is_file():
            try:
                meta = json.loads((path / name).read_text())
            except ValueError as e:
                raise DataFormatError(path / name, None, "the JSON metadata of a saved index", f"invalid JSON ({e})") from e
            if not isinstance(meta, dict):
                raise DataFormatError(path / name, None, "the JSON metadata of a saved index", type(meta).__name__)
            return {**meta, "kind": kind}
    raise ConfigError(
        f"Expected an index folder written by `searchgym index` (with {' or '.join(META_FILES)}), got {str(path)!r}. "
        "Build one: searchgym index --corpus FILE --retriever bm25 --out DIR."
    )
