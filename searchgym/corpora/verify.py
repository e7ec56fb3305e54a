"""Every byte of what searchgym stored, read against the checksums written with it.

``searchgym index --verify PATH`` and ``searchgym serve --verify`` call :func:`verify_storage`:
PATH is an index folder (BM25, dense, or the shards of one: every shard), with the passage
store of the corpus file it records; a passage store folder (``*.searchgym``) or the corpus
file it belongs to; or a cached embedding file (``.npy`` with its ``.npy.json`` record).
Loads check only sizes, dtypes and shapes (a ``stat`` and a header per file); this reads
everything, at disk speed or the checksum's (about 1 GB/s), with a progress bar.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgym.corpora.checksum import verify_files
from searchgym.corpora.embedding_file import read_record, record_path
from searchgym.corpora.index_folder import index_meta, is_index_folder, rebuild_command, rebuild_hint, shard_folders
from searchgym.corpora.mapped import STORE_SUFFIX, store_folder, verify_store
from searchgym.error import DamagedFileError, NoIndexError, StorageError
from searchgym.progress import Progress

__all__ = ["Verified", "verify_storage"]

_MB = 1_000_000


def _files(count: int) -> str:
    return f"{count} file" if count == 1 else f"{count} files"


@dataclass
class Verified:
    """What :func:`verify_storage` read: ``parts`` (one line per index, shard, store or file),
    ``files`` and ``bytes`` in all, in ``seconds``; ``notes``: what could not be read (a
    passage store not built yet)."""

    path: Path
    parts: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def mb_per_second(self) -> float:
        return self.bytes / _MB / self.seconds if self.seconds > 0 else float("inf")

    def summary(self) -> str:
        return (f"{self.path}: {_files(self.files)}, {self.bytes / _MB:,.1f} MB read in {self.seconds:.1f} s "
                f"({self.mb_per_second:,.0f} MB/s): every checksum matches ({'; '.join(self.parts)})."
                + "".join(f" {note}" for note in self.notes))


@dataclass
class _Part:
    label: str
    folder: Path
    files: dict[str, Any] | None  # None: a passage store, read through verify_store
    fix: str


def _index_parts(path: Path) -> list[_Part]:
    meta = index_meta(path)
    if meta["kind"] == "shards":
        return [part for folder in shard_folders(path, meta) for part in _index_parts(folder)]
    files = meta.get("files")
    kind = f"dense {meta['index']}" if meta["kind"] == "dense" and meta.get("index") else meta.get("retriever") or meta["kind"]
    label = f"{path.name}: {kind} index"
    if not files:
        raise StorageError(
            f"{path} was written by a searchgym without checksums (its metadata records no files), so it cannot be "
            f"verified; loads still check its sizes and shapes. Rebuild it to get them: {rebuild_command(path, meta)}."
        )
    return [_Part(f"{label}, {_files(len(files))}", path, files, rebuild_hint(path, meta))]


def _store_part(folder: Path, source: str) -> _Part:
    return _Part(f"passage store of {Path(source).name}", folder, None, f"Open {source} again: its store is built again.")


def _parts(path: Path) -> tuple[list[_Part], list[str]]:
    notes: list[str] = []
    if path.is_dir() and is_index_folder(path):
        parts = _index_parts(path)
        corpus = index_meta(path).get("corpus_path")
        if corpus:
            store = store_folder(corpus)
            if (store / "meta.json").is_file():
                parts.append(_store_part(store, corpus))
            else:
                notes.append(f"The passage store of {corpus} is not built yet (the first open builds it).")
        return parts, notes
    if path.is_dir() and path.name.endswith(STORE_SUFFIX) and (path / "meta.json").is_file():
        return [_store_part(path, path.name.removesuffix(STORE_SUFFIX))], notes
    if path.is_file() and path.suffix == ".npy":
        record = read_record(path)
        if record is None:
            raise StorageError(
                f"{path} has no record of its size and checksum ({record_path(path).name}): it was written before records "
                "were kept, or is not a file searchgym cached. Delete it to have it computed again with one."
            )
        return [_Part(f"embeddings {path.name}", path.parent, {path.name: record}, "Delete it: it is computed again.")], notes
    if path.is_file():  # a corpus file: its passage store
        store = store_folder(path)
        if not (store / "meta.json").is_file():
            raise StorageError(f"{path} has no passage store to verify yet: the first open of the file builds it.")
        return [_store_part(store, str(path))], notes
    if path.is_dir():
        index_meta(path)  # raises NoIndexError: the folder holds no index (an interrupted build?)
    raise NoIndexError(
        f"searchgym index --verify expects an index folder, a passage store (*{STORE_SUFFIX}), a corpus file or a cached "
        f"embedding file (.npy), got {str(path)!r}: no such file or folder."
    )


def verify_storage(path: str | os.PathLike, *, progress: bool = True) -> Verified:
    """Read every file under ``path`` (see the module docstring) and compare it with the size
    and checksum recorded when it was written. Returns what was read; raises
    :class:`~searchgym.error.DamagedFileError` listing every file that differs (with what to
    do), :class:`~searchgym.error.StorageError` for what holds no checksums, and
    :class:`~searchgym.error.NoIndexError` for a path that holds nothing to verify."""
    path = Path(path)
    parts, notes = _parts(path)
    sizes = []
    for part in parts:
        files = part.files if part.files is not None else _store_files(part.folder)
        sizes.append(sum(int(r["bytes"]) for r in files.values()))
    bar = Progress(max(1, -(-sum(sizes) // _MB)), f"Verifying {path}", "MB") if progress else None
    pending = [0]

    def on_bytes(n: int) -> None:
        pending[0] += n
        if bar is not None and pending[0] >= _MB:
            bar.update(pending[0] // _MB)
            pending[0] %= _MB

    result = Verified(path, notes=notes)
    started = time.perf_counter()
    problems: list[tuple[str, _Part]] = []
    try:
        for part, size in zip(parts, sizes):
            found = verify_files(part.folder, part.files, on_bytes) if part.files is not None else verify_store(part.folder, on_bytes)
            problems += [(p, part) for p in found]
            files = part.files if part.files is not None else _store_files(part.folder)
            result.files += len(files)
            result.bytes += size
            result.parts.append(part.label)
    finally:
        if bar is not None:
            if bar.total is not None and bar.n < bar.total and not problems:
                bar.update(bar.total - bar.n)  # the last partial megabyte
            bar.close()
    result.seconds = time.perf_counter() - started
    if problems:
        fixes = list(dict.fromkeys(part.fix for _, part in problems))
        count = f"{len(problems)} file that differs" if len(problems) == 1 else f"{len(problems)} files that differ"
        raise DamagedFileError(
            path, f"every file as it was written (the sizes and checksums recorded with it; {_files(result.files)} read)",
            f"{count}: " + "; ".join(p for p, _ in problems), " ".join(fixes),
        )
    return result


def _store_files(folder: Path) -> dict[str, Any]:
    import json

    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta.get("files") or {} if isinstance(meta, dict) else {}
