"""Passage files opened, not loaded: a memory-mapped passage store built once beside the file.

The first time a passage file is opened, its lines are read and checked once (the same checks
and errors as :func:`read_passages` always made) and written as a
*passage store*: a folder ``<file>.searchgym/`` beside the file (or, where that folder cannot
be written, under the cache dir) holding

* ``blob.bin``: the UTF-8 bytes of every passage's id, title and text, back to back;
* ``offsets.bin``: where each of them starts (little-endian int64, three per passage, then the end);
* ``id_hash.npy`` / ``id_pos.npy``: sorted 64-bit hashes of the ids and their positions, for
  lookup by id (absent when every id is its own line position, ``"0"``, ``"1"``, ..., as in
  wiki-18, where the position is the id);
* ``meta.json``: the passage count, the corpus fingerprint (the same content hash an in-memory
  :class:`~searchgym.corpora.types.Corpus` of these passages has), what identifies the
  source file (size, modification time, inode, a hash of its first and last MiB) and the
  size and checksum of every file above (computed as it was written), with its own checksum.

Every later open, in any process, maps these files: no passage becomes a Python object until
it is asked for, so a process holds almost nothing per passage (the pages the OS caches are
shared by every process on the machine). A store whose source file changed is rebuilt. One
store per file per process: every corpus opened on the same file shares it.

The store fails safe: it is written into a hidden folder and renamed into place when whole
(a first open killed half-way leaves no store, and the next open removes what it left and
builds it); every open checks the files' sizes, dtypes and shapes against ``meta.json``
before mapping them, and a store that differs (a file cut short) is never read: it is built
again from the source file, with a warning. ``searchgym index --verify`` reads every byte
against the checksums (:func:`verify_store`). A full disk is an
:class:`~searchgym.error.OutOfSpaceError` saying what the store needed and had.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import mmap
import os
import shutil
import sys
import threading
import time
import uuid
import warnings
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.cache import cache_dir
from searchgym.corpora.building import SPACE_ERRNOS, folder_bytes, free_bytes, space_error, sync_tree
from searchgym.corpora.checksum import HashingWriter, check_files, check_seal, save_npy, seal, verify_files
from searchgym.corpora.store import (
    PASSAGE_LINE_FORMAT,
    check_data_file,
    default_corpus_name,
    iter_jsonl_objects,
    passage_from,
    repeated_id_error,
)
from searchgym.corpora.types import Corpus, Passage, fingerprint_record
from searchgym.error import DamagedFileError

__all__ = ["STORE_SUFFIX", "MappedCorpus", "PassageStore", "check_store", "open_corpus", "read_passages", "stable_hash",
           "store_folder", "stored_fingerprint", "verify_store"]

STORE_SUFFIX = ".searchgym"
_FORMAT_VERSION = 1
_SAMPLE = 1 << 20  # bytes hashed at each end of the source file to notice a change
_FLUSH = 1 << 20  # offsets kept in memory before they are written out while building
_PROGRESS_BYTES = 64 << 20  # files larger than this show a progress bar while the store is built
_ITER_CHUNK = 4096  # passages decoded per read while iterating


def stable_hash(text: str) -> int:
    """A 64-bit hash of a string (a passage id, a BM25 term), the same in every process and
    run (unlike ``hash``)."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def source_signature(path: Path) -> dict[str, Any]:
    """What identifies the content of a file without reading all of it: size, mtime, inode and
    a hash of its first and last MiB (all of it when smaller than 2 MiB)."""
    stat = path.stat()
    h = hashlib.sha256()
    with path.open("rb") as f:
        h.update(f.read(_SAMPLE))
        if stat.st_size > 2 * _SAMPLE:
            f.seek(-_SAMPLE, os.SEEK_END)
        h.update(f.read())
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "inode": stat.st_ino, "sample_sha256": h.hexdigest()}


def store_folder(path: str | os.PathLike) -> Path:
    """Where the passage store of ``path`` lives: beside the file when its folder is writable,
    else under ``cache_dir()/corpora``."""
    path = Path(path).resolve()
    if os.access(path.parent, os.W_OK):
        return path.with_name(path.name + STORE_SUFFIX)
    key = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    return cache_dir() / "corpora" / f"{path.name}-{key}{STORE_SUFFIX}"


class PassageStore:
    """The mapped files of one passage store (read-only; shared by threads)."""

    def __init__(self, folder: Path, meta: dict[str, Any]):
        self.folder = folder
        self.meta = meta
        self.source = Path(meta["source"]["path"])
        self.size: int = meta["passages"]
        self.fingerprint: str = meta["fingerprint"]
        self.positional: bool = meta["ids"] == "positional"
        self._blob = _map(folder / "blob.bin")
        self._offsets = memoryview(_map(folder / "offsets.bin") or b"\0" * 8).cast("q")
        if not self.positional:
            self._id_hash = np.load(folder / "id_hash.npy", mmap_mode="r")
            self._id_pos = np.load(folder / "id_pos.npy", mmap_mode="r")

    def _field(self, start: int, end: int) -> str:
        return self._blob[start:end].decode("utf-8", "surrogatepass")

    def passage(self, i: int) -> Passage:
        o = self._offsets
        j = 3 * i
        a, b, c, d = o[j], o[j + 1], o[j + 2], o[j + 3]
        blob = self._blob
        return Passage(
            blob[a:b].decode("utf-8", "surrogatepass"),
            blob[b:c].decode("utf-8", "surrogatepass"),
            blob[c:d].decode("utf-8", "surrogatepass"),
        )

    def passage_id(self, i: int) -> str:
        o = self._offsets
        return self._field(o[3 * i], o[3 * i + 1])

    def position(self, passage_id: str) -> int | None:
        """The position of the passage with this id, or None."""
        if self.positional:
            # Only the canonical decimal form is an id ("7", not "07" or " 7").
            if passage_id.isascii() and passage_id.isdigit() and (passage_id == "0" or passage_id[0] != "0"):
                i = int(passage_id)
                return i if i < self.size else None
            return None
        h = np.uint64(stable_hash(passage_id))
        hashes = self._id_hash
        lo = int(np.searchsorted(hashes, h, side="left"))
        while lo < len(hashes) and hashes[lo] == h:
            i = int(self._id_pos[lo])
            if self.passage_id(i) == passage_id:
                return i
            lo += 1
        return None


def _map(path: Path) -> Any:
    """A read-only map of a file (an empty ``bytes`` for an empty file, which mmap refuses)."""
    with path.open("rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


class MappedCorpus(Corpus):
    """A :class:`~searchgym.corpora.types.Corpus` whose passages stay in a memory-mapped store.

    It answers everything a Corpus does (``len``, by position, by id, iteration, ``in``,
    ``fingerprint``), building each :class:`Passage` when asked for. Open one with
    :func:`open_corpus` (or ``load_corpus(path)``). Pickling it pickles the file's path: the
    other process maps the same store.
    """

    def __init__(self, store: PassageStore, name: str):  # noqa: D107 -- no call to Corpus.__init__: nothing is loaded
        self.name = name
        self.path = store.source
        self._store = store
        self._fingerprint = store.fingerprint

    def __len__(self) -> int:
        return self._store.size

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._store.passage(j) for j in range(*i.indices(self._store.size))]
        try:
            j = i.__index__()
        except AttributeError:
            raise TypeError(f"Corpus indices must be integers or slices, not {type(i).__name__}") from None
        n = self._store.size
        if j < 0:
            j += n
        if not 0 <= j < n:
            raise IndexError(f"passage index {i} out of range for corpus {self.name!r} of {n} passages")
        return self._store.passage(j)

    def __iter__(self) -> Iterator[Passage]:
        passage = self._store.passage
        for i in range(self._store.size):
            yield passage(i)

    def __repr__(self) -> str:
        return f"Corpus(name={self.name!r}, passages={len(self)}, file={str(self.path)!r})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return open_corpus, (str(self.path), self.name)

    def index_of(self, passage_id: str) -> int:
        position = self._store.position(passage_id) if isinstance(passage_id, str) else None
        if position is None:
            raise KeyError(f"No passage with id {passage_id!r} in corpus {self.name!r}")
        return position

    def get(self, passage_id: str) -> Passage:
        return self._store.passage(self.index_of(passage_id))

    def __contains__(self, item: object) -> bool:
        if isinstance(item, Passage):
            position = self._store.position(item.id)
            return position is not None and self._store.passage(position) == item
        return isinstance(item, str) and self._store.position(item) is not None


# ------------------------------------------------------------------------ opening

_STORES: dict[str, PassageStore] = {}
_STORES_LOCK = threading.Lock()


def open_corpus(path: str | os.PathLike, name: str | None = None) -> MappedCorpus:
    """The passage file at ``path`` as a :class:`MappedCorpus` named ``name``.

    The first open of a file builds its passage store (reading every line once; a progress
    bar for large files); later opens, in this process or any other, map it. Raises
    :class:`~searchgym.error.DataFormatError` naming the file and line for a malformed line or
    a repeated id, as :func:`read_passages` documents, and for a
    path that is not a regular file (a directory, a named pipe).
    """

    # Before anything reads it: a named pipe would block the signature's read, and a
    # directory is no passage file.
    source = check_data_file(path, "passage").resolve()
    signature = source_signature(source)
    key = str(source)
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is None or store.meta["source"]["signature"] != signature:
            store = _STORES[key] = _open_store(source, signature)
    return MappedCorpus(store, name or default_corpus_name(source))


def read_passages(path: str | os.PathLike, *, name: str | None = None) -> Corpus:
    """Open a passage file (see :mod:`searchgym.corpora.store` for the layouts) as a :class:`Corpus`.

    The passages stay on disk: the first open of a file checks every line and writes a
    memory-mapped passage store beside it (this module); later opens, in
    any process, map that store in milliseconds. ``name`` defaults to the file name without
    ``.jsonl``/``.gz``. Raises :class:`DataFormatError` naming the file and line for a
    malformed line or a repeated id, and ``FileNotFoundError`` if the file does not exist.
    """
    return open_corpus(check_data_file(path, "passage"), name=name)


def stored_fingerprint(path: str | os.PathLike) -> str | None:
    """The corpus fingerprint that the passage store of the file ``path`` records (its
    ``meta.json``), when that store is current for the file as it is now; ``None`` when there is no
    current store (nothing is built or opened: it costs reading the file's first and last MiB)."""
    source = Path(path).resolve()
    try:
        signature = source_signature(source)
    except OSError:
        return None
    meta = _read_meta(store_folder(source))
    if meta is None or meta.get("source", {}).get("signature") != signature:
        return None
    return meta.get("fingerprint")


def _read_meta(folder: Path) -> dict[str, Any] | None:
    """The store's ``meta.json``; None when there is none this version reads, or when it is not
    what was written (unreadable, cut short, its checksum differs): the store is built again."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        if isinstance(meta, dict):
            check_seal(folder / "meta.json", meta, "")
    except (OSError, ValueError):  # DamagedFileError is a ValueError
        return None
    return meta if isinstance(meta, dict) and meta.get("format_version") == _FORMAT_VERSION else None


def check_store(folder: Path, meta: dict[str, Any]) -> None:
    """The cheap check of every open: the store's files have the sizes, dtypes and shapes
    ``meta.json`` records (a store written before records were kept: the sizes its passage count
    implies). Raises :class:`~searchgym.error.DamagedFileError` naming the file."""
    fix = f"Open the corpus again: the store is built again from {meta['source']['path']}."
    files = meta.get("files")
    count = int(meta["passages"])
    if files:
        check_files(folder, files, fix, recorded_in="meta.json")
    offsets = folder / "offsets.bin"
    expected = 8 * (3 * count + 1)
    try:
        size = offsets.stat().st_size
    except FileNotFoundError:
        raise DamagedFileError(offsets, f"{expected:,} bytes ({count:,} passages)", "no such file", fix) from None
    if size != expected and not (count == 0 and size in (0, 8)):
        raise DamagedFileError(offsets, f"{expected:,} bytes ({count:,} passages)", f"{size:,} bytes", fix)
    if count:
        with open(offsets, "rb") as f:
            f.seek(-8, os.SEEK_END)
            end = int.from_bytes(f.read(8), "little", signed=True)
        blob = (folder / "blob.bin").stat().st_size if (folder / "blob.bin").exists() else 0
        if blob != end:
            raise DamagedFileError(folder / "blob.bin", f"{end:,} bytes (where offsets.bin ends)", f"{blob:,} bytes", fix)


def verify_store(folder: Path, on_bytes: Any = None) -> list[str]:
    """Read every file of the passage store ``folder`` against the checksums of its
    ``meta.json``; the problems found (empty: every byte is as written). A store written before
    checksums were kept has none to compare: reported as one problem."""
    meta = _read_meta(folder)
    if meta is None:
        return [f"{folder / 'meta.json'}: missing, unreadable or changed since it was written (the next open builds the store again)"]
    files = meta.get("files")
    if not files:
        return [f"{folder}: written before checksums were kept; delete the folder and open the corpus again to rebuild it"]
    return verify_files(folder, files, on_bytes)


def _leftovers(folder: Path) -> list[Path]:
    prefix = f".{folder.name}."
    try:
        return [p for p in folder.parent.iterdir() if p.name.startswith(prefix) and p.name.endswith((".tmp", ".stale"))]
    except OSError:
        return []


def _remove_leftovers(folder: Path) -> None:
    """With the store's lock held: remove what builders killed half-way left beside it."""
    for path in _leftovers(folder):
        shutil.rmtree(path, ignore_errors=True)


def _open_store(source: Path, signature: dict[str, Any]) -> PassageStore:
    folder = store_folder(source)
    meta = _read_meta(folder)
    damage = None
    if meta is not None and meta["source"]["signature"] == signature:
        try:
            check_store(folder, meta)
        except DamagedFileError as e:
            damage = e
        else:
            if _leftovers(folder):
                _tidy(folder)
            return PassageStore(folder, meta)
    folder.parent.mkdir(parents=True, exist_ok=True)
    # One builder at a time: a second process waits here, then maps what the first wrote.
    with open(folder.with_name(f".{folder.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _remove_leftovers(folder)
        meta = _read_meta(folder)
        if meta is not None and meta["source"]["signature"] == signature:
            try:
                check_store(folder, meta)
            except DamagedFileError as e:
                damage, meta = e, None
        else:
            meta = None
        if meta is None:
            if damage is not None:
                warnings.warn(f"The passage store of {source} is damaged and is not read: {damage} Building it again.", stacklevel=4)
            meta = _build_store(source, signature, folder)
    return PassageStore(folder, meta)


def _tidy(folder: Path) -> None:
    """Remove what killed builders left beside a good store, unless a build runs now."""
    try:
        with open(folder.with_name(f".{folder.name}.lock"), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            _remove_leftovers(folder)
    except OSError:
        pass


def _build_store(source: Path, signature: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Read the passage file once and write its store to ``folder`` (replacing a stale one)."""

    started = time.perf_counter()
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    free = free_bytes(folder.parent)
    tmp.mkdir()
    try:
        fingerprint = hashlib.sha256()
        offsets = array("q")
        lines = array("q")
        positional = True
        position = 0
        bar = _progress(source)
        read = [0, 0]  # bytes and lines since the bar last moved: one update per 4096 lines

        def on_bytes(size: int) -> None:
            read[0] += size
            read[1] += 1
            if read[1] == 4096:
                bar.update(read[0])
                read[0] = read[1] = 0

        with open(tmp / "blob.bin", "wb") as blob_file, open(tmp / "offsets.bin", "wb") as raw_offsets:
            blob, offsets_file = HashingWriter(blob_file), HashingWriter(raw_offsets)
            for line_number, obj in iter_jsonl_objects(source, expected=PASSAGE_LINE_FORMAT, what="passage",
                                                       on_bytes=on_bytes if bar else None):
                passage = passage_from(obj, source, line_number)
                pid = passage.id.encode("utf-8", "surrogatepass")
                title = passage.title.encode("utf-8", "surrogatepass")
                text = passage.text.encode("utf-8", "surrogatepass")
                offsets.extend((position, position + len(pid), position + len(pid) + len(title)))
                blob.write(pid + title + text)
                position += len(pid) + len(title) + len(text)
                fingerprint.update(fingerprint_record(pid, title, text))
                if positional and passage.id != str(len(lines)):
                    positional = False
                lines.append(line_number)
                if len(offsets) >= _FLUSH:
                    offsets_file.write(offsets.tobytes())
                    del offsets[:]
            offsets.append(position)
            offsets_file.write(offsets.tobytes())
        files = {"blob.bin": blob.record(), "offsets.bin": offsets_file.record()}
        if bar:
            bar.update(read[0])
            bar.close()
        count = len(lines)
        if not positional:
            files.update(_write_id_index(tmp, count, lines, source, repeated_id_error))
        meta = {
            "format_version": _FORMAT_VERSION,
            "source": {"path": str(source), "signature": signature},
            "passages": count,
            "fingerprint": fingerprint.hexdigest()[:16],
            "ids": "positional" if positional else "hashed",
            "build_seconds": round(time.perf_counter() - started, 2),
            "files": files,
        }
        (tmp / "meta.json").write_text(json.dumps(seal(meta), indent=2))
        sync_tree(tmp)  # whole on disk before it is renamed into place
        if folder.exists():  # stale: the source changed since it was built
            stale = folder.with_name(f".{folder.name}.{uuid.uuid4().hex[:8]}.stale")
            os.rename(folder, stale)
            shutil.rmtree(stale, ignore_errors=True)
        os.rename(tmp, folder)
        return meta
    except OSError as e:
        if e.errno not in SPACE_ERRNOS:
            raise
        raise space_error(e, what=f"Opening {source} (writing its passage store)", target=folder, written=folder_bytes(tmp),
                          free=free, elsewhere="open a copy of the corpus file on another disk (its store is written beside it)") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_id_index(tmp: Path, count: int, lines: array, source: Path, repeated_id_error: Any) -> dict[str, Any]:
    """Sorted id hashes and their positions; a repeated id is reported at its second line."""
    store = PassageStore.__new__(PassageStore)  # read the ids back from the blob just written
    store._blob = _map(tmp / "blob.bin")
    store._offsets = memoryview(_map(tmp / "offsets.bin")).cast("q")
    hashes = np.fromiter((stable_hash(store.passage_id(i)) for i in range(count)), dtype=np.uint64, count=count)
    order = np.argsort(hashes, kind="stable")  # equal hashes keep file order
    hashes = hashes[order]
    same = np.flatnonzero(hashes[1:] == hashes[:-1])
    repeats = []
    for j in same.tolist():  # equal hashes: the same id, or (rarely) a collision
        first, second = int(order[j]), int(order[j + 1])
        if store.passage_id(first) == store.passage_id(second):
            repeats.append((second, first))
    if repeats:
        second, first = min(repeats)
        raise repeated_id_error(store.passage_id(second), source, lines[second], lines[first], "passage")
    return {"id_hash.npy": save_npy(tmp / "id_hash.npy", hashes), "id_pos.npy": save_npy(tmp / "id_pos.npy", order.astype(np.int64))}


def _progress(source: Path) -> Any:
    size = source.stat().st_size
    if size < _PROGRESS_BYTES:
        return None
    from tqdm.auto import tqdm

    with source.open("rb") as f:
        compressed = f.read(2) == b"\x1f\x8b"  # lines are counted uncompressed: no total then
    return tqdm(total=None if compressed else size, unit="B", unit_scale=True, desc=f"Opening {source.name} (once: building its passage store)",
                file=sys.stderr)
