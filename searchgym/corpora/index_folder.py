"""What an index folder is: the metadata file that names its kind, read and written in one place.

The lowest module of the index code: :mod:`searchgym.corpora.bm25`, the dense retriever and
:mod:`searchgym.corpora.indexes` (which builds and loads any kind) read folders through it.
The metadata is written last, atomically, with its own checksum and the record (size,
checksum, dtype, shape) of every file of the folder (:mod:`searchgym.corpora.checksum`), so a
folder is an index only once it is whole, and every load can tell a file cut short.
"""

from __future__ import annotations

import json
import os
import shlex
import uuid
from pathlib import Path
from typing import Any

from searchgym.corpora.building import folder_bytes, human_bytes, remove_dead_builds
from searchgym.corpora.checksum import check_seal, seal
from searchgym.error import DamagedFileError, DataFormatError, NoIndexError

__all__ = ["INDEX_RETRIEVERS", "META_FILES", "default_prefixes", "index_meta", "is_index_folder", "rebuild_command", "rebuild_hint", "shard_folders",
           "write_meta"]

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


#: Options ``searchgym index --retriever-option`` takes, with the value a build uses without them:
#: a rebuild command names those an index was built with otherwise.
_BM25_DEFAULTS = {"k1": 0.9, "b": 0.4}
_DENSE_DEFAULTS = {"model": "all-MiniLM-L6-v2", "dtype": "float32", "hnsw_m": 32, "ef_construction": 200, "ef_search": 128, "nprobe": 32}


def default_prefixes(model: str | os.PathLike) -> tuple[str, str]:
    """``(query prefix, passage prefix)`` the encoder was trained with: e5 models
    (``intfloat/e5-*``, Search-R1's retriever) expect ``"query: "`` and ``"passage: "``;
    others nothing. The dense retriever's default, and what a rebuild command leaves out."""
    name = Path(os.fspath(model)).name.lower()  # "intfloat/e5-base-v2" and "/models/e5-base-v2" alike
    return ("query: ", "passage: ") if name.startswith(("e5-", "multilingual-e5")) else ("", "")


def _build_options(meta: dict[str, Any], dense: bool) -> list[str]:
    """``--retriever-option KEY=VALUE`` for what the index of ``meta`` was built with besides the defaults."""
    options: dict[str, Any] = {}
    if dense:
        graph = meta.get("index") == "hnsw" or "HNSW" in str(meta.get("index"))
        options = {key: meta[key] for key, default in _DENSE_DEFAULTS.items()
                   if meta.get(key) not in (None, default) and (graph or key not in ("hnsw_m", "ef_construction"))}
        for key, default in zip(("query_prefix", "passage_prefix"), default_prefixes(str(meta.get("model", "")))):
            if meta.get(key) not in (None, default):
                options[key] = meta[key]
    else:
        options = {key: meta[key] for key, default in _BM25_DEFAULTS.items() if meta.get(key) not in (None, default)}
        default_method = "okapi" if meta.get("backend") == "rank_bm25" else "lucene"
        if meta.get("method") not in (None, default_method):
            options["method"] = meta["method"]
            if meta["method"] in ("bm25l", "bm25+") and meta.get("delta") not in (None, 0.5):
                options["delta"] = meta["delta"]
    return [f" --retriever-option {shlex.quote(f'{key}={value}')}" for key, value in options.items()]


def rebuild_command(path: str | os.PathLike, meta: dict[str, Any] | None = None) -> str:
    """The ``searchgym index`` command that builds the index folder ``path`` (of ``meta``) again,
    with the options it was built with where they are not the defaults."""
    meta = meta or {}
    corpus = shlex.quote(str(meta["corpus_path"])) if meta.get("corpus_path") else "FILE"
    dense = meta.get("kind") == "dense" or "model_key" in meta
    if dense:
        index = meta.get("index")
        retriever = "dense-hnsw" if index == "hnsw" else "dense" + ("" if index in (None, "flat") else f" --retriever-option {shlex.quote(f'index={index}')}")
    else:
        retriever = meta.get("retriever") or "bm25"
    shard = meta.get("shard") if isinstance(meta.get("shard"), dict) else None
    shards = shard["count"] if shard else len(meta["shards"]) if isinstance(meta.get("shards"), list) else None
    where = Path(path).parent if shard else Path(path)  # a shard is rebuilt with the whole index it belongs to
    options = "".join(_build_options(meta, dense))
    return (f"searchgym index --corpus {corpus} --retriever {retriever}{options}{f' --shards {shards}' if shards else ''} "
            f"--out {shlex.quote(str(where))} --overwrite")


def rebuild_hint(path: str | os.PathLike, meta: dict[str, Any] | None = None) -> str:
    """What to do about a damaged index folder: copy it again, or the command that rebuilds it."""
    return f"Copy the folder again from where it was built, or rebuild it: {rebuild_command(path, meta)}."


def write_meta(folder: Path, name: str, meta: dict[str, Any]) -> None:
    """Write the metadata file ``name`` of ``folder`` with its checksum, atomically (the last
    file of a build: a folder holds an index once it is there)."""
    tmp = folder / f".{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "w") as f:
            f.write(json.dumps(seal(meta), indent=2))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, folder / name)
    finally:
        tmp.unlink(missing_ok=True)


def _no_index(path: Path) -> NoIndexError:
    removed = remove_dead_builds(path)
    left = ""
    if removed:
        size = sum(size for _, size in removed)
        left = f" An interrupted build left {', '.join(p.name for p, _ in removed)} ({human_bytes(size)}) beside it: removed."
    build = f"searchgym index --corpus FILE --out {path}"
    if not path.exists():
        return NoIndexError(f"{str(path)!r} holds no searchgym index: there is no such file or folder.{left} Build one: {build}.")
    if not path.is_dir():
        return NoIndexError(
            f"{str(path)!r} holds no searchgym index: it is a file, and an index is a folder written by `searchgym index` "
            f"(with {' or '.join(META_FILES)}).{left} Build one: {build}."
        )
    held = folder_bytes(path)
    what = f"it holds {human_bytes(held)} of files but no {' or '.join(META_FILES)}" if held else "it is empty"
    return NoIndexError(
        f"{str(path)!r} holds no searchgym index ({what}): an interrupted build?{left} Run {build}"
        + (" --overwrite." if held else ".")
    )


def index_meta(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata of the index folder ``path`` plus ``"kind"`` (``"bm25"``, ``"dense"`` or
    ``"shards"``). Raises :class:`NoIndexError` for a path that holds no index, and
    :class:`~searchgym.error.DamagedFileError` for metadata changed since it was written."""
    path = Path(path)
    for name, kind in META_FILES.items():
        if (path / name).is_file():
            try:
                meta = json.loads((path / name).read_text())
            except ValueError as e:
                raise DataFormatError(path / name, None, "the JSON metadata of a saved index",
                                      f"invalid JSON ({e}). {rebuild_hint(path)}") from e
            if not isinstance(meta, dict):
                raise DataFormatError(path / name, None, "the JSON metadata of a saved index", type(meta).__name__)
            check_seal(path / name, meta, rebuild_hint(path, {**meta, "kind": kind}))
            meta.pop("meta_checksum", None)
            return {**meta, "kind": kind}
    raise _no_index(path)


def shard_folders(path: str | os.PathLike, meta: dict[str, Any]) -> list[Path]:
    """The shard folders of the sharded index at ``path`` (``meta``: its metadata). Raises
    :class:`DamagedFileError` for a shard that is missing or holds no index (a copy that missed
    it), with the command that rebuilds every shard with the options the others were built with."""
    path = Path(path)
    folders = [path / name for name in meta["shards"]]
    missing = [folder for folder in folders if not is_index_folder(folder)]
    if missing:
        built = next((folder for folder in folders if folder not in missing), None)
        options = {key: value for key, value in index_meta(built).items() if key != "shard"} if built is not None else {}
        folder = missing[0]
        raise DamagedFileError(
            folder, f"an index folder: shard {folders.index(folder)} of the {len(folders)} that {path / 'searchgym_shards.json'} records",
            "no such folder" if not folder.exists() else "a folder that holds no index",
            f"Copy the folder {path} again from where it was built, or rebuild it: {rebuild_command(path, {**options, **meta})}.",
        )
    return folders
