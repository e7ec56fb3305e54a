"""Embedding files written safely: a .npy filled chunk by chunk through a memory map and
renamed into place when complete (resumable after an interruption), JSON written
atomically, and a per-file lock so that two processes do not encode the same corpus at once."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["exclusive", "stream_to_npy", "write_json_atomically"]


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

    Rows go into a memory-mapped ``.<name>.partial`` file beside ``path`` and are flushed
    chunk by chunk, with the count of rows done written after each flush to
    ``.<name>.partial.json``; the complete file is renamed to ``path``. An interrupted run
    leaves no ``path`` (readers never see half a file), and the next run resumes after the
    last flushed chunk.
    """
    partial = path.with_name(f".{path.name}.partial")
    progress = path.with_name(f".{path.name}.partial.json")
    done, out = 0, None
    try:
        record = json.loads(progress.read_text())
        earlier = np.lib.format.open_memmap(partial, mode="r+")
        if record.get("shape") == list(shape) and earlier.shape == shape and earlier.dtype == np.float32:
            done, out = min(int(record["rows"]), shape[0]), earlier
    except (OSError, ValueError, KeyError, TypeError):
        pass  # nothing to resume: start over
    if out is None:
        out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float32, shape=shape)
    for emb in chunks(done):
        out[done : done + len(emb)] = emb
        out.flush()
        done += len(emb)
        write_json_atomically(progress, {"shape": list(shape), "rows": done})
    if done != shape[0]:
        raise RuntimeError(f"the encoder gave {done} embeddings for {shape[0]} passages")
    del out  # unmapped before the rename
    os.replace(partial, path)
    progress.unlink()
