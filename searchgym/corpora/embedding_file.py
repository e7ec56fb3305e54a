"""Embedding files written safely: a .npy filled chunk by chunk through a memory map and
renamed into place when complete (resumable after an interruption), its size and checksum
recorded beside it (``<name>.json``, computed as the rows are written) and checked on every
read, JSON written atomically, and a per-file lock so that two processes do not encode the
same corpus at once."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.corpora.building import SPACE_ERRNOS, free_bytes, space_error
from searchgym.corpora.checksum import Sum64, check_files, preallocate
from searchgym.error import DamagedFileError

__all__ = ["cached_npy", "exclusive", "record_path", "stream_to_npy", "write_json_atomically"]


def record_path(path: Path) -> Path:
    """Where the record (size, checksum, dtype, shape) of the .npy ``path`` is kept."""
    return path.with_name(path.name + ".json")


def read_record(path: Path) -> dict[str, Any] | None:
    """The record of the .npy ``path``; None when there is none (written before records were kept)."""
    try:
        record = json.loads(record_path(path).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and {"bytes", "checksum"} <= set(record) else None


def cached_npy(path: Path) -> np.ndarray | None:
    """The .npy ``path`` memory-mapped read-only, or None when it is absent or unusable: a file
    unlike its record (cut short, another size, dtype or shape) is reported by a warning and
    treated as absent, so that its owner computes it again."""
    if not path.is_file():
        return None
    record = read_record(path)
    if record is not None:
        try:
            check_files(path.parent, {path.name: record}, "It is computed again.", recorded_in=record_path(path).name)
        except DamagedFileError as e:
            warnings.warn(str(e), stacklevel=3)
            return None
    try:
        return np.load(path, mmap_mode="r")
    except (OSError, ValueError):
        return None  # unreadable (cut short, written before records): computed again


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock named after ``path`` (POSIX ``flock``; no lock elsewhere), so
    that two processes encoding the same corpus take turns and the second finds the cache."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    lock = path.with_name(f".{path.name}.lock")
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
            # Removed only after success: a process waiting on the old file then finds the cache
            # complete. After a failure it stays, so that a waiter and a newcomer never encode at once.
            with contextlib.suppress(OSError):
                lock.unlink()
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def stream_to_npy(path: Path, shape: tuple[int, int], chunks: Callable[[int], Iterator[np.ndarray]]) -> None:
    """Fill the .npy ``path`` with the float32 rows ``chunks(start)`` yields from row ``start``.

    Rows go into a memory-mapped ``.<name>.partial`` file beside ``path`` (its space reserved
    up front: a full disk is an OSError at the start, not a SIGBUS in the middle) and are
    flushed chunk by chunk, with the count of rows done and the checksum so far written after
    each flush to ``.<name>.partial.json``; the complete file's record goes to
    ``<name>.json`` (:func:`record_path`) and the file is renamed to ``path``. An interrupted
    run leaves no ``path`` (readers never see half a file), and the next run resumes after the
    last flushed chunk.
    """
    partial = path.with_name(f".{path.name}.partial")
    progress = path.with_name(f".{path.name}.partial.json")
    done, out, total = 0, None, Sum64()
    try:
        record = json.loads(progress.read_text())
        earlier = np.lib.format.open_memmap(partial, mode="r+")
        if record.get("shape") == list(shape) and earlier.shape == shape and earlier.dtype == np.float32:
            done, out = min(int(record["rows"]), shape[0]), earlier
            if "checksum_state" in record:
                total = Sum64(int(record["checksum_state"]))
            else:  # a partial file of an earlier version: checksum what it holds once
                total = _header_sum(partial, earlier.offset)
                total.add_at(earlier.offset // 4, np.ascontiguousarray(earlier[:done]).view(np.uint32))
    except (OSError, ValueError, KeyError, TypeError):
        pass  # nothing to resume: start over
    if out is None:
        out = _reserved_npy(path, partial, shape)
        total = _header_sum(partial, out.offset)
    first, width = out.offset // 4, shape[1]
    for emb in chunks(done):
        emb = np.ascontiguousarray(emb, dtype=np.float32)
        out[done : done + len(emb)] = emb
        out.flush()
        total.add_at(first + done * width, emb.view(np.uint32))
        done += len(emb)
        write_json_atomically(progress, {"shape": list(shape), "rows": done, "checksum_state": total.state})
    if done != shape[0]:
        raise RuntimeError(f"the encoder gave {done} embeddings for {shape[0]} passages")
    size = out.offset + out.nbytes
    del out  # unmapped before the rename
    write_json_atomically(record_path(path), {"bytes": size, "checksum": total.digest, "dtype": "<f4", "shape": list(shape)})
    os.replace(partial, path)
    progress.unlink()


def _reserved_npy(path: Path, partial: Path, shape: tuple[int, int]) -> np.memmap:
    """A new float32 .npy ``partial`` of ``shape``, memory-mapped, its space reserved on disk.
    No room for it (a full disk, a quota, the file size limit) is an
    :class:`~searchgym.error.OutOfSpaceError` naming the cache file, what it needs and what was
    free; nothing is left behind."""
    free = free_bytes(path.parent)
    size = None
    try:
        out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float32, shape=shape)
        size = out.offset + out.nbytes
        with open(partial, "r+b") as f:
            preallocate(f.fileno(), size)
        return out
    except OSError as e:
        out = None  # unmapped before the file goes
        partial.unlink(missing_ok=True)
        if e.errno not in SPACE_ERRNOS:
            raise
        e.filename = str(path)
        e.requested = size if size is not None else 128 + 4 * shape[0] * shape[1]  # the header (at most 128 bytes here) and the rows
        raise space_error(e, what=f"Caching {shape[0]:,} passage embeddings", target=path, written=0, free=free,
                          elsewhere="point the embedding cache at another disk (SEARCHGYM_CACHE, or cache_dir=)") from e


def _header_sum(path: Path, header: int) -> Sum64:
    with open(path, "rb") as f:
        data = f.read(header)
    total = Sum64()
    total.add_bytes_at(0, data)
    return total
